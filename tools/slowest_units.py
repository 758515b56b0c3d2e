#!/usr/bin/env python3
"""Prints the slowest commands of a build from its .ninja_log, and their sum.

usage: slowest_units.py BUILD_DIR [N]

Reads BUILD_DIR/.ninja_log (the last run of each command) and prints the N (default 10) slowest
translation units with their seconds, then the sum over every command: what the build spent
compiling and linking, in seconds of one core (ninja ran them two at a time on 2 cores). CI
prints it after each build, so the budget stays visible.
"""
import os
import subprocess
import sys


def current_outputs(build_dir):
    """The outputs the build's ninja file still names (the log keeps removed ones)."""
    listed = subprocess.run(["ninja", "-C", build_dir, "-t", "targets", "all"],
                            capture_output=True, text=True, check=True).stdout
    return {line.rsplit(":", 1)[0] for line in listed.splitlines() if ":" in line}


def steps(build_dir):
    """Seconds of the last run of each command whose output the build still names."""
    wanted = current_outputs(build_dir)
    last = {}
    with open(os.path.join(build_dir, ".ninja_log"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) >= 4 and fields[3] in wanted:
                last[fields[3]] = (int(fields[1]) - int(fields[0])) / 1000.0
    return last


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    count = int(argv[2]) if len(argv) > 2 else 10
    found = steps(argv[1])
    units = sorted(((s, o) for o, s in found.items() if o.endswith(".o")), reverse=True)
    print(f"the {min(count, len(units))} slowest of {len(units)} translation units in {argv[1]}:")
    for seconds, output in units[:count]:
        print(f"  {seconds:7.1f} s  {output}")
    print(f"all {len(found)} commands: {sum(found.values()):.0f} s of one core")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
