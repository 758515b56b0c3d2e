#!/usr/bin/env python3
"""The ninja targets one `./memgrad` command needs, so each command builds only those.

usage: build_targets.py BUILD_DIR COMMAND [ARGS...]

  demo              the library and the demo program (examples/train_mlp)
  test [--suite S]  what the test suites run (Meson's meson-test-prereq: the test programs and
                    the example programs the docs check runs); with --suite (repeatable), what
                    those suites' tests run and depend on, and nothing else
  bench [ARGS]      the benchmark programs selected by ARGS (as `./memgrad bench` takes them)
                    and their libtorch peers where those are configured
  example [ARGS]    the example named by ARGS (`b05`, `train_mlp`, ...); every example for
                    `list`, `all` or no name
  lab [ARGS]        the lab's replay tool, and for `record -- PROGRAM` that program
  launch [ARGS]     the program of `launch -n N [--] PROGRAM` when it is an example (by name) or
                    an executable of the build directory (by path); nothing for other programs
  estimate [ARGS]   the example PROGRAM of `estimate PROGRAM [ARGS] --device-memory SIZE ...`

Prints one target per line (paths relative to BUILD_DIR, as ninja names them). The targets
come from Meson's introspection file (meson-info/intro-targets.json), so a target that this
configuration does not define (a peer without libtorch) is never named.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import estimate  # noqa: E402
import run_bench  # noqa: E402
from run_example import resolve_name  # noqa: E402

EXAMPLE_DIRS = ("examples", os.path.join("examples", "behaviours"), os.path.join("lab", "cli"))


def executables(build_dir):
    """{relative output path: target name} of every executable this configuration defines."""
    path = os.path.join(build_dir, "meson-info", "intro-targets.json")
    with open(path, encoding="utf-8") as f:
        targets = json.load(f)
    found = {}
    for t in targets:
        if t["type"] != "executable":
            continue
        for filename in t["filename"]:
            found[os.path.relpath(filename, os.path.abspath(build_dir))] = t["name"]
    return found


def examples(build_dir):
    """{example name: target} for the programs `./memgrad example` runs."""
    return {name: rel for rel, name in executables(build_dir).items()
            if os.path.dirname(rel) in EXAMPLE_DIRS}


def resolve_example(found, name):
    """The target of an example named in full or as a behaviour id (b05, B5), or None."""
    resolved = resolve_name(found, name)
    return found[resolved] if resolved is not None else None


def example_targets(build_dir, args):
    found = examples(build_dir)
    words = [a for a in args if not a.startswith("-")]
    if not words or words[0] in ("list", "all"):
        return sorted(found.values())
    target = resolve_example(found, words[0])
    return [target] if target else []


def lab_targets(build_dir, args):
    found = examples(build_dir)
    targets = [found["lab_replay"]] if "lab_replay" in found else []
    if args and args[0] == "record":
        program = record_program(args[1:])
        target = resolve_example(found, program) if program else None
        targets += [target] if target else []
    return targets


def record_program(args):
    """The program of `lab record [--out FILE] [--] PROGRAM ARGS`."""
    i = 0
    while i < len(args):
        if args[i] == "--out":
            i += 2
        elif args[i].startswith("--out=") or (args[i] == "--" and i + 1 < len(args)):
            i += 1
        else:
            return args[i]
    return None


def launch_program(args):
    """The PROGRAM of `launch [options] [--] PROGRAM ARGS` (options: -n N, --store DIR, ...)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return args[i + 1] if i + 1 < len(args) else None
        if a in ("-n", "--nproc", "--store", "--grace", "--build-dir"):
            i += 2
        elif a.startswith("-"):
            i += 1
        else:
            return a
    return None


def launch_targets(build_dir, args):
    program = launch_program(args)
    if program is None:
        return []
    target = resolve_example(examples(build_dir), program)
    if target:
        return [target]
    defined = executables(build_dir)
    rel = os.path.relpath(os.path.abspath(program), os.path.abspath(build_dir))
    return [rel] if rel in defined else []


def estimate_targets(build_dir, args):
    try:
        _, program, _ = estimate.parse(args)
    except (ValueError, estimate.HelpRequested):  # estimate says what is wrong when it runs
        return []
    target = resolve_example(examples(build_dir), program)
    return [target] if target else []


def bench_targets(build_dir, args):
    if any(a in ("-h", "--help", "--list") for a in args):
        return []
    try:
        opts = run_bench.parse_args(args)
        selected = run_bench.select(opts.names)
    except SystemExit:  # bad arguments: run_bench says what is wrong when it runs
        return []
    defined = executables(build_dir)
    targets = []
    for bench in selected:
        peers = [bench.peer + peer.suffix for peer in run_bench.PEERS
                 if bench.peer and opts.peer in (peer.key, "both") and not opts.no_peer
                 and not bench.peer_build]
        peers += [bench.peer] if bench.peer_build else []
        targets += [p for p in (bench.program, *peers) if p in defined]
        if bench.name == "lab_scale" and "lab/cli/lab_replay" in defined:
            targets.append("lab/cli/lab_replay")  # it times `lab_replay plot` as users run it
    return targets


def test_targets(build_dir, args):
    """meson-test-prereq, or with --suite NAME ... the programs of those suites' tests."""
    suites = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--suite"]
    if not suites:
        return ["meson-test-prereq"]
    with open(os.path.join(build_dir, "meson-info", "intro-tests.json"), encoding="utf-8") as f:
        tests = json.load(f)
    with open(os.path.join(build_dir, "meson-info", "intro-targets.json"), encoding="utf-8") as f:
        by_id = {t["id"]: t for t in json.load(f)}
    root = os.path.abspath(build_dir)
    targets = set()
    for test in tests:
        names = {s.split(":", 1)[-1] for s in test["suite"]}
        if not names & set(suites):
            continue
        for dep in test["depends"]:
            target = by_id.get(dep)
            if target is not None:
                targets.update(os.path.relpath(p, root) for p in target["filename"])
    return sorted(targets)


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    build_dir, command, args = argv[0], argv[1], argv[2:]
    if command == "demo":
        targets = ["examples/train_mlp"]
    elif command == "test":
        targets = test_targets(build_dir, args)
    elif command == "bench":
        targets = bench_targets(build_dir, args)
    elif command == "example":
        targets = example_targets(build_dir, args)
    elif command == "lab":
        targets = lab_targets(build_dir, args)
    elif command == "launch":
        targets = launch_targets(build_dir, args)
    elif command == "estimate":
        targets = estimate_targets(build_dir, args)
    else:
        print(f"build_targets: unknown command '{command}'", file=sys.stderr)
        return 2
    print("\n".join(targets))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
