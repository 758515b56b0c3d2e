#!/usr/bin/env python3
"""Regenerates every program output quoted in the docs, and checks that the docs are current.

Markdown files under docs/ (and README.md) quote program output between markers:

    <!-- output: b05_views_share_storage --size 1 -->
    ```text
    ...the program's real output...
    ```
    <!-- end output -->

The first word after "output:" names an executable in <build>/examples,
<build>/examples/behaviours or <build>/lab/cli, or is "estimate" (./memgrad estimate); the rest
are its arguments. `gen_docs.py` runs each program and
rewrites the block; `gen_docs.py --check` runs them again and fails (exit 1, with a diff and the
numbers that disagree) when a quoted block differs from the fresh run.

What the check compares (docs/README.md, "Same output on every machine", says it for readers):
- durations ("7.6 s", "12 ms", "1.6s") are masked: they differ from run to run;
- every byte count (a number followed by B, KiB, MiB or GiB), every integer and all text must
  match exactly;
- other decimal numbers (losses, accuracies, float differences) must match exactly too, unless
  the block's marker states a tolerance, because they depend on the CPU's BLAS kernel (under
  `./memgrad test --variants`, MEMGRAD_VARIANT set, blocks whose program runs on a meta device,
  and so computes nothing, are not run again):

    <!-- output: b14_mixed_precision | tolerance: rel 10% -->
    <!-- output: b10_gradient_accumulation | tolerance: abs 1e-7 -->

  A decimal number a then matches b when |a - b| <= abs + rel * max(|a|, |b|). The generated
  block says so under its output, so the tolerance is stated next to the numbers it covers.

docs/memory-guide.md is assembled from docs/memory-guide/intro.md and the per-behaviour
sections docs/memory-guide/bNN-*.md, in order, after their outputs are regenerated.
"""
import argparse
import difflib
import glob
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from run_example import find_examples  # noqa: E402

MARKER = re.compile(r"<!-- output: (?P<spec>[^>]*?) -->\n(?P<body>.*?)<!-- end output -->", re.S)
# A duration with the spaces before it (right-aligned columns change width with the number).
DURATION = re.compile(r"[ \t]*\b\d+(\.\d+)?\s?(s|ms|us|µs|ns|min)\b")
# A number as the programs print them: "1,179,648", "-2.56", "6.52e-09", "85.31".
NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
BYTE_UNIT = re.compile(r"\s?(?:B|KiB|MiB|GiB|TiB)\b")
TOLERANCE_TERM = re.compile(r"^(rel|abs)\s+([0-9.eE+-]+)(%?)$")


class Tolerance(NamedTuple):
    """How far a decimal number of a block may move between machines (0, 0: not at all)."""
    rel: float = 0.0
    abs: float = 0.0

    def allows(self, a, b):
        return abs(a - b) <= self.abs + self.rel * max(abs(a), abs(b))

    def describe(self):
        terms = []
        if self.rel:
            terms.append(f"{self.rel * 100:g}% (relative)")
        if self.abs:
            terms.append(f"{self.abs:g} (absolute)")
        return " or ".join(terms)


def parse_spec(spec):
    """(command, Tolerance) from a marker's text "CMD [| tolerance: rel 10%, abs 1e-7]"."""
    command, _, rest = spec.partition("|")
    command = command.strip()
    if not rest.strip():
        return command, Tolerance()
    key, _, terms = rest.partition(":")
    if key.strip() != "tolerance" or not terms.strip():
        raise ValueError(f"marker '{spec}': expected '| tolerance: rel N%, abs X' after the command")
    values = {}
    for term in terms.split(","):
        m = TOLERANCE_TERM.match(term.strip())
        if not m or m.group(1) in values:
            raise ValueError(f"marker '{spec}': bad tolerance term '{term.strip()}' "
                             f"(use 'rel 10%' or 'abs 1e-7', each at most once)")
        try:
            value = float(m.group(2)) / (100 if m.group(3) else 1)
        except ValueError:
            raise ValueError(f"marker '{spec}': '{m.group(2)}' is not a number") from None
        if not 0 < value < float("inf"):
            raise ValueError(f"marker '{spec}': a tolerance must be a positive number")
        if m.group(1) == "rel" and not m.group(3):
            raise ValueError(f"marker '{spec}': write a relative tolerance as a percentage")
        values[m.group(1)] = value
    return command, Tolerance(**values)


def normalised(text):
    return DURATION.sub(" <duration>", text)


def tokens(text):
    """The text as a list of ("text", words), ("exact", number) and ("float", number) items.

    Runs of whitespace count as one space (a column may widen with its numbers). Byte counts and
    integers are "exact"; other decimal numbers are "float"."""
    items, pos = [], 0
    for m in NUMBER.finditer(text):
        items.append(("text", " ".join(text[pos:m.start()].split())))
        s = m.group()
        decimal = any(c in s for c in ".eE") and not BYTE_UNIT.match(text, m.end())
        items.append(("float", s) if decimal else ("exact", s))
        pos = m.end()
    items.append(("text", " ".join(text[pos:].split())))
    return items


def differences(old, new, tolerance):
    """Why the quoted output `old` does not stand for the fresh output `new` (empty: it does)."""
    old_lines, new_lines = normalised(old).splitlines(), normalised(new).splitlines()
    if len(old_lines) != len(new_lines):
        return [f"{len(old_lines)} lines quoted, {len(new_lines)} in the fresh run"]
    found = []
    for number, (a, b) in enumerate(zip(old_lines, new_lines), 1):
        ta, tb = tokens(a), tokens(b)
        kinds_match = [k for k, _ in ta] == [k for k, _ in tb]
        if not kinds_match or any(ka != "float" and va != vb for (ka, va), (_, vb) in zip(ta, tb)):
            found.append(f"line {number}: text, a byte count or an integer differs")
            continue
        for (kind, va), (_, vb) in zip(ta, tb):
            if kind == "float" and not tolerance.allows(float(va), float(vb)):
                allowed = tolerance.describe() or "none: the block states no tolerance"
                found.append(f"line {number}: {va} quoted, {vb} now (tolerance {allowed})")
    return found


def tolerance_note(tolerance):
    """The sentence a generated block carries under its output when it has a tolerance."""
    return (f"*Checked on every machine: the byte counts, integers and text above exactly; the "
            f"other numbers, which depend on the CPU's BLAS kernel and thread count, within "
            f"{tolerance.describe()}; durations not at all.*\n")


def find_program(build_dir, name):
    path = find_examples(build_dir).get(name)
    if path is None:
        raise SystemExit(f"gen_docs: program '{name}' is not built in {build_dir}/examples")
    return path


def run(build_dir, command, cache):
    if command in cache:
        return cache[command]
    words = command.split()
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "passive"))
    program = ([sys.executable, os.path.join(ROOT, "tools", "estimate.py"), "--build-dir",
                build_dir] if words[0] == "estimate" else [find_program(build_dir, words[0])])
    proc = subprocess.run(program + words[1:], capture_output=True, text=True, timeout=600,
                          env=env, cwd=ROOT)
    out = proc.stdout.rstrip("\n")
    if proc.returncode not in (0,):
        out += f"\n[exit status {proc.returncode}]"
        if proc.stderr.strip():
            out += "\n" + proc.stderr.strip()
    cache[command] = out
    return out


def run_all(build_dir, texts, cache):
    """Runs every program that regenerate() will run on `texts` ({path: text}) into `cache`, two
    at a time: the programs are independent, and one alone keeps about one core busy. A bad
    marker raises ValueError naming its file."""
    commands = []
    for path, text in texts.items():
        for m in MARKER.finditer(text):
            try:
                command = parse_spec(m.group("spec").strip())[0]
            except ValueError as e:
                raise ValueError(f"{os.path.relpath(path, ROOT)}: {e}") from None
            if command not in commands and runs_here(command):
                commands.append(command)
    with ThreadPoolExecutor(max_workers=2) as pool:
        outputs = list(pool.map(lambda c: run(build_dir, c, {}), commands))
    cache.update(zip(commands, outputs))


def computes_nothing(command):
    """Whether a block's program runs on a meta device (estimate, or --device meta:N): shapes
    only, no arithmetic, so no BLAS kernel or thread count can change its output."""
    words = command.split()
    return words[0] == "estimate" or any(w.startswith("meta:") for w in words)


def runs_here(command):
    """Under ./memgrad test --variants (MEMGRAD_VARIANT set) the blocks that compute nothing are
    not run again: the variants exist for what a BLAS kernel or a thread count can change."""
    return not (os.environ.get("MEMGRAD_VARIANT") and computes_nothing(command))


def regenerate(text, build_dir, cache):
    def block(m):
        spec = m.group("spec").strip()
        command, tolerance = parse_spec(spec)
        if not runs_here(command):
            return m.group(0)
        note = tolerance_note(tolerance) if tolerance != Tolerance() else ""
        return (f"<!-- output: {spec} -->\n```text\n{run(build_dir, command, cache)}\n```\n"
                f"{note}<!-- end output -->")
    return MARKER.sub(block, text)


def split_blocks(text):
    """([text between blocks], [(spec, body)]) of a markdown file."""
    between, blocks, pos = [], [], 0
    for m in MARKER.finditer(text):
        between.append(text[pos:m.start()])
        blocks.append((m.group("spec").strip(), m.group("body")))
        pos = m.end()
    between.append(text[pos:])
    return between, blocks


def stale_reasons(old, new):
    """Why the file text `old` is not current against the regenerated `new` (empty: current)."""
    old_between, old_blocks = split_blocks(old)
    new_between, new_blocks = split_blocks(new)
    if old_between != new_between or [s for s, _ in old_blocks] != [s for s, _ in new_blocks]:
        return ["the text around the output blocks differs"]
    reasons = []
    for (spec, old_body), (_, new_body) in zip(old_blocks, new_blocks):
        reasons += [f"[{spec}] {why}" for why in differences(old_body, new_body, parse_spec(spec)[1])]
    return reasons


def assemble_guide(texts):
    """The guide from intro.md and the bNN-*.md sections; `texts` overrides file contents."""
    def read(path):
        return texts.get(path) or open(path, encoding="utf-8").read()
    parts = ["<!-- Generated by tools/gen_docs.py from docs/memory-guide/intro.md and "
             "docs/memory-guide/bNN-*.md: edit those files, not this one. -->\n"]
    intro = os.path.join(ROOT, "docs", "memory-guide", "intro.md")
    if os.path.exists(intro):
        parts.append(read(intro).rstrip() + "\n")
    for path in sorted(glob.glob(os.path.join(ROOT, "docs", "memory-guide", "b[0-9][0-9]-*.md"))):
        parts.append(read(path).rstrip() + "\n")
    return "\n".join(parts)


def targets():
    files = sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    files.append(os.path.join(ROOT, "README.md"))
    return [f for f in files if os.path.basename(f) != "memory-guide.md"]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    parser.add_argument("--check", action="store_true", help="fail if any quoted output is stale")
    opts = parser.parse_args()
    cache = {}
    stale = []
    new_texts = {}
    olds = {path: open(path, encoding="utf-8").read() for path in targets()}
    olds = {path: text for path, text in olds.items() if "<!-- output:" in text}
    try:
        run_all(opts.build_dir, olds, cache)
    except ValueError as e:
        print(f"gen_docs: {e}", file=sys.stderr)
        return 2
    for path, old in olds.items():
        new_texts[path] = regenerate(old, opts.build_dir, cache)
    if os.path.isdir(os.path.join(ROOT, "docs", "memory-guide")):
        new_texts[os.path.join(ROOT, "docs", "memory-guide.md")] = assemble_guide(new_texts)
    for path, text in new_texts.items():
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
        if opts.check:
            reasons = stale_reasons(old, text)
            if reasons:
                stale.append(path)
                diff = difflib.unified_diff(old.splitlines(), text.splitlines(), path, "fresh run",
                                            lineterm="", n=1)
                print("\n".join(list(diff)[:60]))
                print("\n".join(f"  {os.path.relpath(path, ROOT)}: {r}" for r in reasons[:20]))
        elif old != text:
            open(path, "w", encoding="utf-8").write(text)
            print(f"updated {os.path.relpath(path, ROOT)}")
    if opts.check:
        if stale:
            print(f"\nstale docs: {', '.join(os.path.relpath(p, ROOT) for p in stale)}; "
                  f"run tools/gen_docs.py to regenerate them")
            return 1
        print(f"docs are current ({len(new_texts)} files, {len(cache)} program runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
