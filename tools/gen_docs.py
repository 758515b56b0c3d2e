#!/usr/bin/env python3
"""Regenerates every program output quoted in the docs, and checks that the docs are current.

Markdown files under docs/ (and README.md) quote program output between markers:

    <!-- output: b05_views_share_storage --size 1 -->
    ```text
    ...the program's real output...
    ```
    <!-- end output -->

The first word after "output:" names an executable in <build>/examples or
<build>/examples/behaviours; the rest are its arguments. `gen_docs.py` runs each program and
rewrites the block; `gen_docs.py --check` regenerates in memory and fails (exit 1, with a diff)
when any quoted block differs from a fresh run. Durations ("7.6 s", "12 ms") are compared as
placeholders, since they differ from run to run; every byte count must match exactly.

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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from run_example import find_examples  # noqa: E402

MARKER = re.compile(r"<!-- output: (?P<cmd>[^>]*?) -->\n.*?<!-- end output -->", re.S)
# A duration with the spaces before it (right-aligned columns change width with the number).
DURATION = re.compile(r"[ \t]*\b\d+(\.\d+)?\s?(s|ms|us|µs|ns|min)\b")


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
    proc = subprocess.run([find_program(build_dir, words[0])] + words[1:], capture_output=True,
                          text=True, timeout=600, env=env, cwd=ROOT)
    out = proc.stdout.rstrip("\n")
    if proc.returncode not in (0,):
        out += f"\n[exit status {proc.returncode}]"
        if proc.stderr.strip():
            out += "\n" + proc.stderr.strip()
    cache[command] = out
    return out


def regenerate(text, build_dir, cache):
    def block(m):
        cmd = m.group("cmd").strip()
        return f"<!-- output: {cmd} -->\n```text\n{run(build_dir, cmd, cache)}\n```\n<!-- end output -->"
    return MARKER.sub(block, text)


def assemble_guide(texts):
    """The guide from intro.md and the bNN-*.md sections; `texts` overrides file contents."""
    def read(path):
        return texts.get(path) or open(path, encoding="utf-8").read()
    parts = []
    intro = os.path.join(ROOT, "docs", "memory-guide", "intro.md")
    if os.path.exists(intro):
        parts.append(read(intro).rstrip() + "\n")
    for path in sorted(glob.glob(os.path.join(ROOT, "docs", "memory-guide", "b[0-9][0-9]-*.md"))):
        parts.append(read(path).rstrip() + "\n")
    return "\n".join(parts)


def normalised(text):
    return DURATION.sub(" <duration>", text)


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
    for path in targets():
        old = open(path, encoding="utf-8").read()
        if "<!-- output:" not in old:
            continue
        new_texts[path] = regenerate(old, opts.build_dir, cache)
    if os.path.isdir(os.path.join(ROOT, "docs", "memory-guide")):
        new_texts[os.path.join(ROOT, "docs", "memory-guide.md")] = assemble_guide(new_texts)
    for path, text in new_texts.items():
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
        if opts.check:
            if normalised(old) != normalised(text):
                stale.append(path)
                diff = difflib.unified_diff(old.splitlines(), text.splitlines(), path, "fresh run",
                                            lineterm="", n=1)
                print("\n".join(list(diff)[:60]))
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
