#!/usr/bin/env python3
"""Runs the example programs: `./memgrad example NAME [ARGS]`, `list`, `all`.

Examples are the executables in <build>/examples (training programs),
<build>/examples/behaviours (one per documented behaviour, bNN_name) and <build>/lab/cli (the
policy lab's programs). Each answers --describe with one line, which is what `list` prints.
"""
import argparse
import os
import subprocess
import sys

SKIPPED = 77  # a behaviour this build cannot run (examples/behaviours/behaviour.h)


def find_examples(build_dir):
    found = {}
    for sub in ("examples", os.path.join("examples", "behaviours"), os.path.join("lab", "cli")):
        folder = os.path.join(build_dir, sub)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if os.path.isfile(path) and os.access(path, os.X_OK) and not name.endswith((".a", ".so")):
                found[name] = path
    return found


def describe(path):
    try:
        out = subprocess.run([path, "--describe"], capture_output=True, text=True, timeout=30)
        return out.stdout.strip() or "(no description)"
    except (OSError, subprocess.SubprocessError) as e:
        return f"(cannot describe: {e})"


def behaviours(examples):
    return [n for n in sorted(examples) if len(n) > 3 and n[0] == "b" and n[1:3].isdigit()]


def resolve_name(names, name):
    """The example `name` stands for among `names`: itself, or the behaviour whose id it gives
    ("b05", "B5"); None when it names none or several."""
    if name in names:
        return name
    short = name.lower().lstrip("b").zfill(2)
    matches = [n for n in behaviours(names) if n[1:3] == short]
    return matches[0] if len(matches) == 1 else None


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--timeout", type=float, default=None,
                        help="with 'all': seconds for each example; one that runs longer is "
                             "killed and counted as a mismatch (the others still run)")
    parser.add_argument("name", nargs="?", help="an example name, 'list' or 'all'")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args()
    examples = find_examples(opts.build_dir)
    if not examples:
        print(f"no examples built in {opts.build_dir}/examples", file=sys.stderr)
        return 1
    if opts.name in (None, "list"):
        print("training programs:")
        for name in sorted(examples):
            if name not in behaviours(examples):
                print(f"  {name:<28} {describe(examples[name])}")
        print("behaviours (./memgrad example all runs them in order):")
        for name in behaviours(examples):
            print(f"  {name:<28} {describe(examples[name])}")
        return 0
    if opts.name == "all":
        failed, skipped = [], []
        for name in behaviours(examples):
            print(f"\n===== {name} =====", flush=True)
            try:
                status = subprocess.run([examples[name]] + opts.args,
                                        timeout=opts.timeout).returncode
            except subprocess.TimeoutExpired:
                print(f"{name}: killed after {opts.timeout:g} s", flush=True)
                failed.append(f"{name} (timed out)")
                continue
            if status == SKIPPED:
                skipped.append(name)
            elif status != 0:
                failed.append(name)
        ran = len(behaviours(examples)) - len(skipped)
        print(f"\n{ran - len(failed)} of {ran} behaviour examples matched their expectations"
              + (f" ({len(skipped)} skipped, this build cannot run them: {', '.join(skipped)})"
                 if skipped else "")
              + (f"; mismatches: {', '.join(failed)}" if failed else ""))
        return 1 if failed else 0
    name = resolve_name(examples, opts.name)
    if name is None:
        print(f"unknown example '{opts.name}'; `./memgrad example list` shows them",
              file=sys.stderr)
        return 2
    opts.name = name
    os.execv(examples[opts.name], [examples[opts.name]] + opts.args)


if __name__ == "__main__":
    sys.exit(main())
