#!/usr/bin/env python3
"""`./memgrad estimate PROGRAM [ARGS] --device-memory SIZE [--policy NAME] [--ranks N]
[--backend gloo|nccl] [--steps K] [--max-batch] [--depth D] [--timeline FILE.svg] [--brief]`:
whether a training run fits on a device of SIZE, its peaks and where their bytes are, without
computing it.

Runs the example PROGRAM (train_mlp, train_charlm, a behaviour example, any example that takes
--device) with ARGS and --device meta:0, a device of SIZE (MEMGRAD_META_MEMORY) whose tensors
have shapes and no values (docs/estimate.md), under the policy NAME (MEMGRAD_ALLOC_CONF), recording
the device's allocator trace, and prints the peaks over the whole run (its training steps and its
evaluation), e.g.

  estimate: train_mlp --epochs 1 --max-steps 3 --batch-size 4096 on meta:0, 85,899,345,920 B (80.00 GiB), caching
  fits: yes
  peak allocated: 54,655,488 B (52.12 MiB), first at event 145 of 912 (backward)
  peak reserved: 69,206,016 B (66.00 MiB), first at event 85 of 912 (optimizer, zeros)

With --ranks N (ARGS with --ddp or --zero S), each of the N ranks runs alone on its own meta device
(RANK and WORLD_SIZE set, no peers): its collectives allocate what --backend's collectives
allocate (default nccl, what a GPU run uses; gloo for cpu and sim runs) and move nothing. The
peaks are printed per rank, ranks with the same peaks on one line.

Then the model states each rank holds after its last optimizer step (parameters, gradients with
DDP's buckets, optimizer state with master weights; as allocated), the bytes ZeRO's formulas
count: with --precision master-bf16 and Adam, 2 + 2 + 12 per parameter before sharding.

Then, unless --brief, at the peak allocated bytes, a table of modules (cut to --depth dotted parts, default 2) x
categories (parameters, gradients, optimizer state, saved activations, inputs, temporaries,
other, the allocator's rounding) whose total is the peak, and the bytes reserved in no block
(tools/memory_categories.py says how each block is put in its category). --timeline writes the
run's memory over time, stacked by category, as SVG.

--steps K: the program's own step count (train_mlp: --epochs 1 --max-steps K; train_charlm:
--steps K). With --max-batch, first the largest --batch-size that fits (doubling, then bisecting,
in multiples of N x --accumulate, each probe a run of every rank), then the estimate of the run
at that batch.

The peaks are those the same run reaches on a real device of SIZE under the same policy: the
allocator's decisions never depend on values. When the run does not fit, `fits: no` and the
program's out-of-memory message (the op, the request and where the free bytes are) follow.

Exit status: 0 fits, 1 does not fit, 2 bad input (an unknown program, a size that does not
parse, ARGS that choose the device themselves, a program that fails for another reason, no batch
that fits).
"""
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memory_categories  # noqa: E402
from run_example import find_examples, resolve_name  # noqa: E402

DEVICE = "meta:0"
# estimate's own options with a value, and their defaults.
OWN_OPTIONS = {"--device-memory": None, "--policy": None, "--build-dir": "build", "--ranks": "1",
               "--backend": None, "--steps": None, "--timeline": None, "--depth": "2"}
OWNED_FLAGS = ("--device", "--memory-limit", "--alloc-policy")  # the program's, set by estimate
# How --steps K reaches each program.
STEP_FLAGS = {"train_mlp": ["--epochs", "1", "--max-steps"], "train_charlm": ["--steps"]}


def human(nbytes):
    value, unit = float(nbytes), "B"
    for next_unit in ("KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024:
            break
        value, unit = value / 1024, next_unit
    return f"{nbytes:,} B ({value:.2f} {unit})" if unit != "B" else f"{nbytes:,} B"


def peak(trace, field):
    """(value, index of the first event reaching it) of `field` over the trace's events."""
    best, at = 0, -1
    for i, event in enumerate(trace["memgrad_events"]):
        if event[field] > best:
            best, at = event[field], i
    return best, at


def last_message(stderr):
    """The program's last line on stderr (not the trace writer's note)."""
    lines = [line for line in stderr.strip().splitlines() if not line.startswith("[memgrad]")]
    return lines[-1] if lines else "(no message)"


def fail(message):
    print(f"estimate: error: {message}", file=sys.stderr)
    return 2


class HelpRequested(Exception):
    """-h or --help before the program: print the usage."""


def parse(argv):
    """estimate's own options, anywhere on the line, and PROGRAM with the rest of its ARGS."""
    opts = {k: v for k, v in OWN_OPTIONS.items() if v is not None}
    rest = []
    i = 0
    while i < len(argv):
        a = argv[i]
        name = a.split("=", 1)[0]
        if name in OWN_OPTIONS:
            if "=" in a:
                opts[name] = a.split("=", 1)[1]
            elif i + 1 < len(argv):
                opts[name] = argv[i + 1]
                i += 1
            else:
                raise ValueError(f"{name} needs a value")
        elif a in ("--max-batch", "--brief"):
            opts[a] = True
        elif a in ("-h", "--help") and not rest:
            raise HelpRequested()
        else:
            rest.append(a)
        i += 1
    if "--device-memory" not in opts:
        raise ValueError("--device-memory SIZE is required (80GiB, 512MiB, a number of bytes)")
    if not rest or rest[0].startswith("-"):
        raise ValueError("name the program to estimate first: estimate PROGRAM [ARGS] "
                         "--device-memory SIZE")
    for name in ("--ranks", "--steps", "--depth"):
        if name in opts and not (opts[name].isdigit() and 1 <= int(opts[name]) <= 4096):
            raise ValueError(f"{name} {opts[name]}: a whole number in [1, 4096]")
    if opts.get("--backend", "nccl") not in ("gloo", "nccl"):
        raise ValueError(f"--backend {opts['--backend']}: gloo or nccl")
    return opts, rest[0], rest[1:]


def data_parallel(args):
    """Whether ARGS ask the program for --ddp or --zero."""
    return any(a in ("--ddp", "--zero") or a.startswith("--zero=") for a in args)


class Probe:
    """One run of the program on the meta device, as rank `rank` of `world`: its exit status,
    stderr and what estimate prints of its device trace (the trace itself is not kept: 64 ranks'
    traces of a long run would not fit in this process)."""

    def __init__(self, path, args, opts, rank=0, world=1, report=False):
        command = [path] + args + ["--device", DEVICE]
        if world > 1 and "--backend" in opts:
            command += ["--backend", opts["--backend"]]
        with tempfile.TemporaryDirectory() as folder:
            trace_path = os.path.join(folder, "trace.json")
            # The capacity and the policy through the environment, which every program reads
            # (the training programs, the behaviour examples, one's own).
            env = dict(os.environ, MEMGRAD_TRACE=trace_path,
                       MEMGRAD_META_MEMORY=opts["--device-memory"])
            if "--policy" in opts:
                conf = os.environ.get("MEMGRAD_ALLOC_CONF", "")
                env["MEMGRAD_ALLOC_CONF"] = f"policy:{opts['--policy']}" + (
                    f",{conf}" if conf else "")
            if world > 1:
                env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
            proc = subprocess.run(command, capture_output=True, text=True, env=env)
            self.returncode, self.stderr = proc.returncode, proc.stderr
            self.trace = None
            device_trace = os.path.join(folder, "trace." + DEVICE.replace(":", "") + ".json")
            for p in (device_trace, trace_path):
                if os.path.exists(p):
                    with open(p, encoding="utf-8") as f:
                        candidate = json.load(f)
                    if candidate.get("device") == DEVICE:
                        self.trace = candidate
        self.found = self.trace is not None
        # The first out-of-memory event, found once: whether the run fits and where it did not.
        self.oom_at = next((i for i, e in enumerate(self.trace["memgrad_events"])
                            if e["action"] == "oom"), None) if self.found else None
        self.out_of_memory = self.oom_at is not None
        if self.found:
            self.summarise(opts if report else None)
        self.trace = None
        # Exit 2: the run finished, but a row of the program's own expected-vs-measured report
        # did not match (its expectations, not the bytes measured, are off).
        self.report_mismatch = self.returncode == 2 and not self.out_of_memory

    def summarise(self, opts):
        """The header, the peak lines and (with `opts`: the run to print) the table and the
        timeline of the trace."""
        trace = self.trace
        self.capacity, self.policy = trace["capacity"], trace["policy"]
        events = len(trace["memgrad_events"])
        place = memory_categories.where
        self.oom_where = (f"event {self.oom_at + 1} of {events}{place(trace, self.oom_at)}"
                          if self.out_of_memory else "")
        self.peaks = {}
        for field in ("allocated", "reserved"):
            value, at = peak(trace, field)
            self.peaks[field] = human(value) + (
                f", first at event {at + 1} of {events}{place(trace, at)}" if at >= 0 else "")
        if opts is None:
            return
        blocks = memory_categories.blocks_of(trace)
        states = memory_categories.model_states(trace, blocks)
        self.model_states = (
            ", ".join(f"{k} {v:,}" for k, v in states.items()) +
            f"; total {human(sum(states.values()))}") if states else "none"
        self.table = memory_categories.table_text(trace, blocks, int(opts["--depth"]))
        self.svg = (memory_categories.svg(trace, blocks, f"estimate on {DEVICE} of "
                                          f"{human(self.capacity)}: memory by category")
                    if "--timeline" in opts else None)

    def error(self, name):
        """Why the run says nothing about memory, or None."""
        if self.returncode != 0 and not self.out_of_memory and not self.report_mismatch:
            return f"{name} failed (exit {self.returncode}): {last_message(self.stderr)}"
        if not self.found:
            return f"{name} left no trace of {DEVICE}: does it take --device?"
        return None


def run_ranks(path, args, opts, report=False):
    """One Probe per rank, run as many at a time as there are cores."""
    world = int(opts["--ranks"])
    with ThreadPoolExecutor(max_workers=min(world, os.cpu_count() or 1)) as pool:
        return list(pool.map(lambda r: Probe(path, args, opts, r, world, report), range(world)))


def with_batch(args, batch):
    """`args` with --batch-size set to `batch`."""
    out, i = [], 0
    while i < len(args):
        if args[i] == "--batch-size":
            i += 2
            continue
        if not args[i].startswith("--batch-size="):
            out.append(args[i])
        i += 1
    return out + ["--batch-size", str(batch)]


def flag_value(args, flag, default):
    """The integer value of `flag` in args (the last one), or default."""
    value = default
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args) and args[i + 1].isdigit():
            value = int(args[i + 1])
        elif a.startswith(flag + "=") and a.split("=", 1)[1].isdigit():
            value = int(a.split("=", 1)[1])
    return value


def max_batch(path, name, args, opts):
    """The largest --batch-size that fits, in multiples of ranks x --accumulate (every batch must
    split into them): doubling from one multiple, then bisecting. Each probe a run of every rank."""
    unit = int(opts["--ranks"]) * flag_value(args, "--accumulate", 1)
    fits = {}

    def probe(multiple):
        batch = multiple * unit
        for result in run_ranks(path, with_batch(args, batch), opts):
            message = result.error(name)
            if message:
                raise RuntimeError(f"at --batch-size {batch}: {message}")
            if result.out_of_memory:
                fits[batch] = False
                return False
        fits[batch] = True
        return True

    if not probe(1):
        raise LookupError(f"no batch fits on {DEVICE} of {opts['--device-memory']}: "
                          f"--batch-size {unit} runs out of memory")
    low, high = 1, 2
    while probe(high):
        low, high = high, high * 2
        if high > 1 << 20:
            return low * unit, fits
    while high - low > 1:
        middle = (low + high) // 2
        if probe(middle):
            low = middle
        else:
            high = middle
    return low * unit, fits


def rank_names(ranks):
    """'rank 3', 'ranks 0-63', 'ranks 0, 2'."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ", ".join(map(str, ranks))


def grouped_by_rank(runs, text_of):
    """[(text, ' (ranks ...)', ranks)]: the runs grouped by the text they give, in order of
    first appearance (the middle part is '' for a single run)."""
    groups = {}
    for rank, run in enumerate(runs):
        groups.setdefault(text_of(run), []).append(rank)
    return [(text, f" ({rank_names(ranks)})" if len(runs) > 1 else "", ranks)
            for text, ranks in groups.items()]


def print_peaks(runs):
    """Peak allocated and reserved with where each is first reached; with several ranks, one line
    per group of ranks whose line is the same."""
    for label, field in (("peak allocated", "allocated"), ("peak reserved", "reserved")):
        for text, who, _ in grouped_by_rank(runs, lambda run: run.peaks[field]):
            print(f"{label}{who}: {text}")


def print_model_states(runs):
    """Each rank's model states after its last optimizer step, in bytes (one line per group of
    ranks whose bytes are the same)."""
    for text, who, _ in grouped_by_rank(runs, lambda run: run.model_states):
        print(f"model states{who}: {text}")


def print_categories(runs, opts):
    """At the peak allocated bytes, the table of modules x categories (tools/memory_categories.py)
    of each rank whose table differs from those before it; with --timeline, its memory over time
    stacked by category as SVG (one file per such rank, "FILE.rankR.svg", when there are
    several)."""
    tables = grouped_by_rank(runs, lambda run: run.table)
    for text, who, ranks in tables:
        print(f"\nwhere the peak allocated bytes are{who}:")
        sys.stdout.write(text)
        if "--timeline" in opts:
            path = opts["--timeline"]
            if len(tables) > 1:
                stem, ext = os.path.splitext(path)
                path = f"{stem}.rank{ranks[0]}{ext or '.svg'}"
            with open(path, "w", encoding="utf-8") as f:
                f.write(runs[ranks[0]].svg)
            print(f"timeline: {path}")


def main(argv):
    try:
        opts, program, args = parse(argv)
    except HelpRequested:
        print(__doc__)
        return 0
    except ValueError as e:
        return fail(str(e))
    for flag in OWNED_FLAGS:
        if any(a == flag or a.startswith(flag + "=") for a in args):
            return fail(f"{flag} is estimate's to set (the device is {DEVICE}, its capacity "
                        f"--device-memory, its policy --policy)")
    ranks = int(opts["--ranks"])
    if ranks > 1 and not data_parallel(args):
        return fail(f"--ranks {ranks} needs the program's --ddp or --zero STAGE: without them "
                    f"every rank would be the same one-process run")
    found = find_examples(opts["--build-dir"])
    name = resolve_name(found, program)
    if name is None:
        return fail(f"unknown program '{program}' (./memgrad example list names them)")
    if "--steps" in opts:
        if name not in STEP_FLAGS:
            return fail(f"--steps: {name} has no step count that estimate knows "
                        f"({', '.join(STEP_FLAGS)} have); pass its own flag in ARGS")
        args = args + STEP_FLAGS[name] + [opts["--steps"]]
    if "--max-batch" in opts:
        try:
            batch, fits = max_batch(found[name], name, args, opts)
        except (RuntimeError, LookupError) as e:
            return fail(str(e))
        tried = ", ".join(f"{b} {'fits' if ok else 'does not'}" for b, ok in sorted(fits.items()))
        print(f"largest batch that fits: {batch} ({len(fits)} runs: {tried})")
        args = with_batch(args, batch)
    runs = run_ranks(found[name], args, opts, report=True)
    for run in runs:
        message = run.error(name)
        if message:
            return fail(message)
    shown = " ".join([name] + args)
    collectives = (f", {ranks} ranks each alone on its meta device, collectives as "
                   f"{opts.get('--backend', 'nccl')}'s" if ranks > 1 else "")
    print(f"estimate: {shown} on {DEVICE}, {human(runs[0].capacity)}, {runs[0].policy}"
          f"{collectives}")
    short = [rank for rank, run in enumerate(runs) if run.out_of_memory]
    if ranks > 1:
        print(f"fits: {'no (' + rank_names(short) + ' run out of memory)' if short else 'yes'}")
    else:
        print(f"fits: {'no' if short else 'yes'}")
    print_peaks(runs)
    print_model_states(runs)
    if "--brief" not in opts:
        print_categories(runs, opts)
    if any(run.report_mismatch for run in runs):
        print(f"note: {name}'s own expected-vs-measured report has rows that do not match "
              f"(exit 2); the peaks above are measured")
    if short:
        first = runs[short[0]]
        print(f"out of memory at {first.oom_where}: {last_message(first.stderr)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
