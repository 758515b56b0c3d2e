#!/usr/bin/env python3
"""Where a traced run's memory goes: each block live at the peak by module and category, and the
memory over time stacked by category (docs/estimate.md, "Where the bytes go").

  ./memgrad lab categories TRACE.json [--svg FILE] [--depth N]

TRACE.json is an allocator trace (MEMGRAD_TRACE, `./memgrad lab record`, or the trace of an
estimate). Every block is put in one category, from the trace alone:

  parameters         blocks the program named parameters or buffers (each module names its own;
                     ZeRO its flat units, shards and gathered units)
  gradients          blocks named gradients (DDP's buckets, ZeRO's flat gradients), and blocks
                     allocated in a backward pass that outlive it (.grad)
  optimizer state    blocks allocated in an optimizer step that outlive it
  saved activations  blocks allocated in a forward pass (or a checkpoint's recomputation) that
                     outlive it: what autograd keeps for backward, and the outputs
  inputs             blocks allocated while loading data (the trace label "data loading")
  temporaries        blocks freed in the pass that allocated them
  other              blocks allocated outside any pass that outlive it and that nobody named

A pass is a run of consecutive events of one phase. A block counts its requested bytes in its
category; the allocator's rounding (block size - requested) has its own column, and the bytes
reserved but in no block (cached free blocks, fragmentation) their own row, so the rows sum to
the allocated bytes at the peak and, with that last row, to the reserved bytes then.

A block's module is the module whose forward (or whose autograd nodes, in backward, or whose
parameters, in the optimizer) allocated it, or the module that named it; "module." (the prefix a
DDP or ZeRO wrapper adds) is left out, and "(top level)" is everything outside a registered
submodule (the model's own forward code, the loss, the data, the optimizer's own). Rows are modules
cut to --depth dotted parts (default 2); rows that differ only in a number and hold the same bytes
are printed once, "blocks.* (x48, each)".
"""
import argparse
import bisect
import json
import re
import sys

CATEGORIES = ("parameters", "gradients", "optimizer state", "saved activations", "inputs",
              "temporaries", "other")
ROLE_CATEGORY = {"parameter": "parameters", "buffer": "parameters", "gradient": "gradients",
                 "optimizer state": "optimizer state"}
PHASE_CATEGORY = {"forward": "saved activations", "forward (recompute)": "saved activations",
                  "backward": "gradients", "optimizer": "optimizer state"}
ROUNDING = "rounding"
FREE = "reserved, not allocated"
NO_MODULE = "(top level)"  # the model's own forward, the loss, data, code outside modules
# The stack's colours, bottom to top: categories, rounding, then the reserved bytes no block holds.
COLOURS = {"parameters": "#4e79a7", "gradients": "#f28e2b", "optimizer state": "#e15759",
           "saved activations": "#76b7b2", "inputs": "#59a14f", "temporaries": "#edc948",
           "other": "#b07aa1", ROUNDING: "#9c755f", FREE: "#d9d9d9"}


class Block:
    __slots__ = ("addr", "size", "requested", "alloc", "free", "category", "module", "role")

    def __init__(self, addr, size, requested, alloc):
        self.addr, self.size, self.requested, self.alloc = addr, size, requested, alloc
        self.free = None  # the index of its free_requested event; None: never freed
        self.category, self.module = "other", ""
        self.role = ""  # the role the program named it with ("parameter", "buffer", ...), if any


def display_module(path):
    """The module as the table shows it: without a wrapper's "module." prefix."""
    if path == "module":
        return ""
    return path[len("module."):] if path.startswith("module.") else path


def passes(events, contexts):
    """The pass of each event (consecutive events of one phase) and the last event of each."""
    pass_of, last = [], []
    previous = None
    for i, e in enumerate(events):
        phase = contexts[e["ctx"]]["phase"]
        if phase != previous:
            last.append(i)
            previous = phase
        last[-1] = i
        pass_of.append(len(last) - 1)
    return pass_of, last


def blocks_of(trace):
    """Every block the trace allocates, with its lifetime, category and module."""
    events, contexts = trace["memgrad_events"], trace["contexts"]
    pass_of, _ = passes(events, contexts)
    live, out = {}, []
    for i, e in enumerate(events):
        if e["action"] == "alloc":
            live[e["addr"]] = Block(e["addr"], e["size"], e["requested"], i)
            out.append(live[e["addr"]])
        elif e["action"] == "free_requested":
            block = live.pop(e["addr"], None)
            if block is not None:
                block.free = i
    names = {}
    for n in trace.get("memgrad_names", []):
        names.setdefault(n["addr"], []).append(n)
    for entries in names.values():
        entries.sort(key=lambda n: n["event"])
    for b in out:
        context = contexts[events[b.alloc]["ctx"]]
        b.module = context.get("module", "")
        # The last name given while the block was live: after its allocation, up to its free.
        entries = names.get(b.addr, [])
        keys = [n["event"] for n in entries]
        end = b.free if b.free is not None else len(events)
        k = bisect.bisect_right(keys, end) - 1
        if k >= 0 and keys[k] > b.alloc and entries[k]["role"] in ROLE_CATEGORY:
            b.category, b.module = ROLE_CATEGORY[entries[k]["role"]], entries[k]["module"]
            b.role = entries[k]["role"]
        elif context.get("label") == "data loading" or context["phase"] == "data":
            b.category = "inputs"
        elif b.free is not None and pass_of[b.free] == pass_of[b.alloc]:
            b.category = "temporaries"
        else:
            b.category = PHASE_CATEGORY.get(context["phase"],
                                            "other" if context["phase"] == "" else "temporaries")
        b.module = display_module(b.module)
    return out


def where(trace, index):
    """' (phase, module, op, label)' of the trace event at `index`, as its context names them
    ("" when it names none)."""
    context = trace["contexts"][trace["memgrad_events"][index]["ctx"]]
    parts = [p for p in (context.get("phase"), display_module(context.get("module", "")),
                         context.get("op"), context.get("label")) if p]
    return f" ({', '.join(parts)})" if parts else ""


def peak_event(trace):
    """The index of the first event at the peak of allocated bytes (-1 for no event)."""
    best, at = -1, -1
    for i, e in enumerate(trace["memgrad_events"]):
        if e["allocated"] > best:
            best, at = e["allocated"], i
    return at


def model_states(trace, blocks):
    """The model states a rank holds after its last optimizer step: {"parameters", "gradients",
    "optimizer state"} in bytes, each block's request rounded up to 512 B as the caching policy
    rounds requests (what ZeRO's formulas and B22 count; a block's unsplit remainder is the
    allocator's, in the table's rounding column), taken at the
    last event of the optimizer phase (the gradients are still there: zero_grad comes after; at
    the end of the run when no optimizer ran). Parameters are the blocks named parameters (not
    buffers); gradients include DDP's buckets; the optimizer state includes master weights.
    None for a trace without events."""
    events, contexts = trace["memgrad_events"], trace["contexts"]
    if not events:
        return None
    at = len(events) - 1
    for i in range(len(events) - 1, -1, -1):
        if contexts[events[i]["ctx"]]["phase"] == "optimizer":
            at = i
            break
    states = {"parameters": 0, "gradients": 0, "optimizer state": 0}
    for b in blocks:
        if b.alloc <= at and (b.free is None or b.free > at):
            rounded = (b.requested + 511) // 512 * 512
            if b.role == "parameter":
                states["parameters"] += rounded
            elif b.category in ("gradients", "optimizer state"):
                states[b.category] += rounded
    return states


def census(trace, blocks, at):
    """{module: {category: bytes}} of the blocks live after event `at`, rounding included, and
    the bytes reserved then in no block."""
    table = {}
    for b in blocks:
        if b.alloc <= at and (b.free is None or b.free > at):
            row = table.setdefault(b.module, dict.fromkeys(CATEGORIES + (ROUNDING,), 0))
            row[b.category] += b.requested
            row[ROUNDING] += b.size - b.requested
    event = trace["memgrad_events"][at]
    return table, event["reserved"] - event["allocated"]


def grouped(table, depth):
    """Rows cut to `depth` dotted parts and summed; rows that differ only in a number and hold
    the same bytes become one: (name, count, row of each)."""
    cut = {}
    for module, row in table.items():
        key = ".".join(module.split(".")[:depth]) if module else ""
        into = cut.setdefault(key, dict.fromkeys(row, 0))
        for k, v in row.items():
            into[k] += v
    rows, alike = [], {}
    for key in sorted(cut, key=natural_key):
        pattern = re.sub(r"\d+", "*", key)
        signature = (pattern, tuple(cut[key].values()))
        if pattern != key and signature in alike:
            rows[alike[signature]][1] += 1
            continue
        alike[signature] = len(rows)
        rows.append([key, 1, cut[key]])
    return [(re.sub(r"\d+", "*", k) if n > 1 else k, n, row) for k, n, row in rows]


def natural_key(text):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def mib(nbytes):
    return f"{nbytes / 2**20:,.2f}"


def table_text(trace, blocks, depth=2, at=None):
    """The table of modules x categories at the peak (or after event `at`), in MiB, with the
    exact totals in bytes under it."""
    at = peak_event(trace) if at is None else at
    if at < 0:
        return "no allocation in the trace\n"
    table, free = census(trace, blocks, at)
    columns = [c for c in CATEGORIES + (ROUNDING,) if any(r[c] for r in table.values())]
    rows = grouped(table, depth)
    width = max([len(NO_MODULE), len(FREE)] + [len(n) + 10 for n, _, _ in rows])
    head = f"{'module (MiB)':<{width}}" + "".join(f"{c:>19}" for c in columns) + f"{'total':>14}"
    lines = [head]
    totals = dict.fromkeys(columns, 0)
    for name, count, row in rows:
        label = (name or NO_MODULE) + (f" (x{count}, each)" if count > 1 else "")
        lines.append(f"{label:<{width}}" + "".join(f"{mib(row[c]):>19}" for c in columns) +
                     f"{mib(sum(row[c] for c in columns)):>14}")
        for c in columns:
            totals[c] += row[c] * count
    allocated = sum(totals.values())
    lines.append(f"{'total':<{width}}" + "".join(f"{mib(totals[c]):>19}" for c in columns) +
                 f"{mib(allocated):>14}")
    lines.append(f"{FREE:<{width}}" + " " * (19 * len(columns)) + f"{mib(free):>14}")
    event = trace["memgrad_events"][at]
    lines.append(f"at event {at + 1} of {len(trace['memgrad_events'])}{where(trace, at)}: "
                 f"allocated {allocated:,} B = "
                 + " + ".join(f"{c} {totals[c]:,}" for c in columns)
                 + f"; reserved {allocated + free:,} B = allocated + {free:,} in no block")
    assert allocated == event["allocated"], (allocated, event["allocated"])
    return "\n".join(lines) + "\n"


def timeline(trace, blocks, width=1000):
    """The stacked series: for each of at most `width` columns, the event that has the most
    allocated bytes in its stretch of the trace (so every peak is drawn) and the bytes of each
    layer after it."""
    events = trace["memgrad_events"]
    by_event = [[] for _ in events]  # the blocks each event allocates or frees, signed
    for b in blocks:
        by_event[b.alloc].append((b, 1))
        if b.free is not None:
            by_event[b.free].append((b, -1))
    layers = CATEGORIES + (ROUNDING,)
    current = dict.fromkeys(layers, 0)
    states = []
    for i, e in enumerate(events):
        for b, sign in by_event[i]:
            current[b.category] += sign * b.requested
            current[ROUNDING] += sign * (b.size - b.requested)
        states.append((e["allocated"], dict(current, **{FREE: e["reserved"] - e["allocated"]})))
    if not states:
        return []
    step = max(1, -(-len(states) // width))
    picked = []
    for begin in range(0, len(states), step):
        stretch = range(begin, min(begin + step, len(states)))
        i = max(stretch, key=lambda k: (states[k][0], states[k][1][FREE]))
        picked.append((i, states[i][1]))
    return picked


def svg(trace, blocks, title):
    """The memory over time as an SVG: one stacked area per category, the reserved bytes no block
    holds on top, an axis in GiB or MiB, a legend; each column has a tooltip with its bytes."""
    columns = timeline(trace, blocks)
    layers = CATEGORIES + (ROUNDING, FREE)
    shown = [k for k in layers if any(s[k] for _, s in columns)]
    top = max([sum(s[k] for k in shown) for _, s in columns] + [1])
    unit, scale = ("GiB", 2**30) if top >= 2**30 else ("MiB", 2**20)
    left, right, plot_top, plot_h, plot_w = 70, 190, 40, 300, 760
    n = max(len(columns), 1)

    def x(k):
        return left + plot_w * k / n

    def y(v):
        return plot_top + plot_h * (1 - v / top)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + plot_w + right}" '
           f'height="{plot_top + plot_h + 50}" font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="20" font-size="13">{escape(title)}</text>']
    base = [0] * len(columns)
    for k in shown:
        upper = [base[c] + columns[c][1][k] for c in range(len(columns))]
        points = [f"{x(c):.1f},{y(upper[c]):.1f} {x(c + 1):.1f},{y(upper[c]):.1f}"
                  for c in range(len(columns))]
        points += [f"{x(c + 1):.1f},{y(base[c]):.1f} {x(c):.1f},{y(base[c]):.1f}"
                   for c in reversed(range(len(columns)))]
        out.append(f'<polygon fill="{COLOURS[k]}" stroke="none" points="{" ".join(points)}">'
                   f'<title>{escape(k)}</title></polygon>')
        base = upper
    for t in range(6):
        v = top * t / 5
        out.append(f'<line x1="{left - 4}" x2="{left}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                   f'stroke="black"/><text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">'
                   f'{v / scale:.2f}</text>')
    out.append(f'<text x="14" y="{plot_top + plot_h / 2}" transform="rotate(-90 14 '
               f'{plot_top + plot_h / 2})" text-anchor="middle">{unit}</text>')
    out.append(f'<rect x="{left}" y="{plot_top}" width="{plot_w}" height="{plot_h}" '
               f'fill="none" stroke="black"/>')
    events = len(trace["memgrad_events"])
    out.append(f'<text x="{left + plot_w / 2}" y="{plot_top + plot_h + 30}" '
               f'text-anchor="middle">allocator events (1 to {events:,})</text>')
    for c, (i, s) in enumerate(columns):  # hover: the column's bytes
        context = trace["contexts"][trace["memgrad_events"][i]["ctx"]]
        text = "; ".join(f"{k} {s[k]:,} B" for k in shown if s[k])
        out.append(f'<rect x="{x(c):.1f}" y="{plot_top}" width="{plot_w / n:.2f}" '
                   f'height="{plot_h}" fill="transparent"><title>event {i + 1} '
                   f'({escape(context["phase"] or "-")}): {escape(text)}</title></rect>')
    for k, key in enumerate(reversed(shown)):
        ly = plot_top + 14 * k
        out.append(f'<rect x="{left + plot_w + 12}" y="{ly}" width="10" height="10" '
                   f'fill="{COLOURS[key]}"/><text x="{left + plot_w + 26}" y="{ly + 9}">'
                   f'{escape(key)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def escape(text):
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def main(argv):
    parser = argparse.ArgumentParser(prog="./memgrad lab categories",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--svg", help="write the memory over time, stacked by category, here")
    parser.add_argument("--depth", type=int, default=2,
                        help="dotted parts of a module path a row keeps (default 2)")
    opts = parser.parse_args(argv)
    if opts.depth < 1:
        parser.error(f"--depth {opts.depth}: at least 1")
    try:
        with open(opts.trace, encoding="utf-8") as f:
            trace = json.load(f)
        blocks = blocks_of(trace)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
        print(f"lab categories: {opts.trace} is not a memgrad trace: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(table_text(trace, blocks, opts.depth))
    if opts.svg:
        with open(opts.svg, "w", encoding="utf-8") as f:
            f.write(svg(trace, blocks, f"{trace.get('device', '')} memory by category"))
        print(f"timeline: {opts.svg}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
