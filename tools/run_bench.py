#!/usr/bin/env python3
"""Runs memgrad's benchmark programs (`./memgrad bench [NAME...]`).

Each benchmark is a program in the build directory that prints `name: value unit` lines and
PASS/FAIL target lines; this runner only selects, runs and streams them. To add one, append a
Benchmark to BENCHMARKS: its name (what users type), its path under the build directory, what it
measures (shown by --list), and the arguments that make it quick (--quick).

usage: run_bench.py [--build-dir DIR] [--list] [--quick] [NAME...]
Exits non-zero when a selected program is not built or fails.
"""
import argparse
import os
import subprocess
import sys
from typing import NamedTuple


class Benchmark(NamedTuple):
    name: str
    program: str  # relative to the build directory
    description: str
    quick_args: tuple = ()


BENCHMARKS = [
    Benchmark("alloc", "bench/alloc_bench",
              "allocate+free pairs: caching and passthrough allocators vs malloc",
              ("--quick",)),
]


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="./memgrad bench", description="Run memgrad's benchmark programs.")
    parser.add_argument("--build-dir", default="build",
                        help="the Meson build directory (default: build)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument("--quick", action="store_true",
                        help="fewer iterations, for a demo (noisier numbers)")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="benchmarks to run (default: all)")
    return parser.parse_args(argv)


def select(names):
    """The benchmarks named (all when none), or exits with the list of known names."""
    if not names:
        return list(BENCHMARKS)
    by_name = {b.name: b for b in BENCHMARKS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        known = ", ".join(by_name)
        sys.exit(f"run_bench: unknown benchmark {', '.join(map(repr, unknown))} (known: {known})")
    return [by_name[n] for n in names]


def run(bench, build_dir, quick):
    """Runs one benchmark with its output streamed; returns its exit status."""
    path = os.path.join(build_dir, bench.program)
    if not os.access(path, os.X_OK):
        print(f"run_bench: error: benchmark '{bench.name}' is not built: {path} does not exist. "
              f"Build it with `./memgrad build` (or `ninja -C {build_dir}`; Meson option "
              f"-Dbench=true).", file=sys.stderr, flush=True)
        return 1
    cmd = [path, *(bench.quick_args if quick else ())]
    print(f"== {bench.name}: {' '.join(cmd)}", flush=True)
    status = subprocess.run(cmd, check=False).returncode
    if status != 0:
        print(f"run_bench: error: benchmark '{bench.name}' exited with status {status}",
              file=sys.stderr, flush=True)
    return status


def main(argv):
    args = parse_args(argv)
    if args.list:
        width = max(len(b.name) for b in BENCHMARKS)
        for b in BENCHMARKS:
            print(f"{b.name:<{width}}  {b.description}  ({b.program})")
        return 0
    failed = [b.name for b in select(args.names) if run(b, args.build_dir, args.quick) != 0]
    if failed:
        print(f"run_bench: {len(failed)} benchmark(s) failed: {', '.join(failed)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
