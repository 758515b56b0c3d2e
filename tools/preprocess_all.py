#!/usr/bin/env python3
"""Runs the preprocessor over every translation unit of a configured build directory.

usage: preprocess_all.py BUILD_DIR

Reads BUILD_DIR/compile_commands.json (Meson writes it at setup), turns each compile command
into a preprocessing one (-E, output discarded) and runs them two at a time. Every #include must
resolve: the GPU kit's check (tools/gpu_kit.sh check) runs it with the system's copies of the
kit's headers hidden, so a header that only the system has fails it. Prints the count; exits 1
naming the first sources that failed, with the compiler's message.
"""
import json
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def preprocess_command(entry):
    args = shlex.split(entry["command"])
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MQ", "-MT"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD"):
            continue
        out.append(a)
    return out + ["-E", "-o", os.devnull]


def run(entry):
    proc = subprocess.run(preprocess_command(entry), cwd=entry["directory"], text=True,
                          capture_output=True, check=False)
    return entry["file"], proc.returncode, proc.stderr


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(os.path.join(argv[1], "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    with ThreadPoolExecutor(max_workers=max(os.cpu_count() or 1, 1)) as pool:
        results = list(pool.map(run, entries))
    failed = [(file, err) for file, status, err in results if status != 0]
    for file, err in failed[:5]:
        print(f"preprocess_all: {file} failed:\n{err.strip()[:2000]}", file=sys.stderr)
    if failed:
        print(f"preprocess_all: {len(failed)} of {len(entries)} sources failed", file=sys.stderr)
        return 1
    print(f"preprocess_all: {len(entries)} sources preprocessed, every include found")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
