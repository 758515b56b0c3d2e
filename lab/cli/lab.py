#!/usr/bin/env python3
"""The allocator policy lab: `./memgrad lab COMMAND ...` (docs/allocator-lab.md).

  record [--out PATH] -- PROGRAM [ARGS]   run an example program (train_mlp, fragmenter, b20,
                                          ...) or any executable with MEMGRAD_TRACE=PATH, so
                                          every device allocator records its trace and writes it
                                          at exit; prints the trace file(s). Default PATH:
                                          memgrad-traces/PROGRAM.json
  snapshot [--out PATH] -- PROGRAM [ARGS] the same with MEMGRAD_SNAPSHOT=PATH: each device's
                                          memory snapshot in PyTorch's format (pickle; JSON for
                                          a .json PATH), which pytorch.org/memory_viz opens.
                                          Default PATH: memgrad-snapshots/PROGRAM.pickle
  replay TRACE [--policy A,B,C] [--capacity SIZE] [--timed-passes N] [--device N] [--validate]
                                          serve the requests of a trace or a snapshot (memgrad's
                                          or PyTorch's) with each policy on a fresh simulated
                                          device and print the comparison table; --validate
                                          compares the caching policy's segment decisions with
                                          the recorded ones
  plot TRACE [--out-dir DIR] [--policy P] [--capacity SIZE]
                                          write an SVG timeline and a Perfetto JSON of the trace
                                          (or of its replay under P); prints the file names
  categories TRACE [--svg FILE] [--depth N]
                                          where the bytes at the trace's peak are: a table of
                                          modules x categories (parameters, gradients, optimizer
                                          state, saved activations, ...) summing to the peak;
                                          --svg draws the memory over time stacked by category
  plan TRACE [--out FILE]                 the planned policy's plan of a trace's first step
                                          (arena against the ideal); --out writes the plan file
                                          for MEMGRAD_ALLOC_CONF=policy:planned,planned_plan:FILE
  layout [--out-dir DIR] [--summary-only] draw each policy's blocks after a fixed sequence
                                          (docs/images/allocator-lab-<policy>.svg)
  policies                                list the policies (MEMGRAD_ALLOC_CONF=policy:NAME)

replay, plot, plan and layout run <build>/lab/cli/lab_replay; categories is
tools/memory_categories.py.
"""
import argparse
import glob
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from run_example import find_examples, resolve_name  # noqa: E402


# The exit status of a program whose MEMGRAD_TRACE could not be written (engine/memory.cpp).
TRACE_WRITE_FAILED = 3


def lab_tool(build_dir):
    path = os.path.join(build_dir, "lab", "cli", "lab_replay")
    if not os.access(path, os.X_OK):
        sys.exit(f"lab: {path} is not built (./memgrad build)")
    return path


def resolve_program(build_dir, name):
    """An example name (train_mlp, fragmenter, b20 / B20 / b20_memory_timeline) or a path."""
    examples = find_examples(build_dir)
    resolved = resolve_name(examples, name)
    if resolved is not None:
        return examples[resolved]
    if os.access(name, os.X_OK) and os.path.isfile(name):
        return name
    sys.exit(f"lab: unknown program '{name}' (`./memgrad example list` shows the examples)")


def written_traces(path, since):
    """The trace files MEMGRAD_TRACE=path produced: path itself (one device) or one per device
    (path with the device before the extension)."""
    stem, ext = os.path.splitext(path)
    candidates = [path] + sorted(glob.glob(f"{glob.escape(stem)}.*{ext}"))
    return [p for p in candidates if os.path.isfile(p) and os.path.getmtime(p) >= since]


def cmd_record(opts, variable="MEMGRAD_TRACE", folder="memgrad-traces", ext=".json",
               what="trace"):
    command = opts.command
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        sys.exit(f"lab {opts.cmd}: nothing to run (usage: ./memgrad lab {opts.cmd} -- PROGRAM "
                 f"[ARGS])")
    program = resolve_program(opts.build_dir, command[0])
    out = opts.out or os.path.join(folder, os.path.basename(program) + ext)
    try:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    except OSError as e:
        print(f"lab {opts.cmd}: cannot create the folder of '{out}': {e.strerror}",
              file=sys.stderr)
        return 1
    env = dict(os.environ, **{variable: os.path.abspath(out)})
    start = time.time() - 1
    status = subprocess.run([program] + command[1:], env=env).returncode
    files = written_traces(os.path.abspath(out), start)
    name = os.path.basename(program)
    if status == TRACE_WRITE_FAILED:
        print(f"lab {opts.cmd}: {name} could not write its {what} (see the error above)",
              file=sys.stderr)
        return status
    if not files:
        print(f"lab {opts.cmd}: {name} wrote no {what} (status {status}; no allocation on any "
              f"device?)", file=sys.stderr)
        return status or 1
    for f in files:
        print(f"{what}: {os.path.relpath(f)} ({os.path.getsize(f)} bytes)")
    if status != 0:
        print(f"lab {opts.cmd}: {name} exited with status {status}; the {what} covers the run "
              f"up to that point", file=sys.stderr)
        return status
    if what == "trace":
        print("next: ./memgrad lab replay TRACE   and   ./memgrad lab plot TRACE")
    else:
        print("next: open it in https://pytorch.org/memory_viz, or ./memgrad lab replay "
              "SNAPSHOT --validate")
    return 0


def main():
    parser = argparse.ArgumentParser(prog="./memgrad lab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default="build")
    sub = parser.add_subparsers(dest="cmd")
    rec = sub.add_parser("record", help="run a program with allocator tracing on")
    rec.add_argument("--out", help="trace file (default memgrad-traces/PROGRAM.json)")
    rec.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS]")
    snap = sub.add_parser("snapshot", help="run a program and write its memory snapshot")
    snap.add_argument("--out", help="snapshot file (default memgrad-snapshots/PROGRAM.pickle)")
    snap.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS]")
    rep = sub.add_parser("replay", help="compare the policies on a trace or a snapshot")
    rep.add_argument("trace")
    rep.add_argument("--device", help="the snapshot's device to replay")
    rep.add_argument("--validate", action="store_true",
                     help="compare the segment decisions with the recorded ones")
    rep.add_argument("--policy", help="comma-separated policies (default: all)")
    rep.add_argument("--capacity", help="simulated device capacity, e.g. 512MiB")
    rep.add_argument("--timed-passes", help="timed passes per policy (default 3)")
    plot = sub.add_parser("plot", help="SVG timeline and Perfetto JSON of a trace")
    plot.add_argument("trace")
    plot.add_argument("--out-dir")
    plot.add_argument("--policy")
    plot.add_argument("--capacity")
    cat = sub.add_parser("categories", help="modules x categories at the peak, and --svg the "
                         "memory over time stacked by category")
    cat.add_argument("trace")
    cat.add_argument("--svg", help="write the stacked timeline here")
    cat.add_argument("--depth", help="dotted parts of a module path a row keeps (default 2)")
    plan = sub.add_parser("plan", help="the planned policy's plan of a trace's first step")
    plan.add_argument("trace")
    plan.add_argument("--out", help="write the plan file here")
    lay = sub.add_parser("layout", help="draw each policy's layout after a fixed sequence")
    lay.add_argument("--out-dir")
    lay.add_argument("--summary-only", action="store_true")
    sub.add_parser("policies", help="list the policies")
    opts = parser.parse_args()
    if opts.cmd == "record":
        return cmd_record(opts)
    if opts.cmd == "snapshot":
        return cmd_record(opts, "MEMGRAD_SNAPSHOT", "memgrad-snapshots", ".pickle", "snapshot")
    if opts.cmd == "categories":
        import memory_categories  # noqa: E402 (tools/, on the path above)
        args = [opts.trace] + (["--svg", opts.svg] if opts.svg else []) + (
            ["--depth", opts.depth] if opts.depth else [])
        return memory_categories.main(args)
    if opts.cmd in ("replay", "plot", "plan", "layout"):
        args = [lab_tool(opts.build_dir), opts.cmd]
        if opts.cmd != "layout":
            args.append(opts.trace)
        for flag in ("policy", "capacity", "timed_passes", "out_dir", "device", "out"):
            value = getattr(opts, flag, None)
            if value:
                args += ["--" + flag.replace("_", "-"), value]
        if getattr(opts, "summary_only", False):
            args.append("--summary-only")
        if getattr(opts, "validate", False):
            args.append("--validate")
        return subprocess.run(args).returncode
    if opts.cmd == "policies":
        return subprocess.run([lab_tool(opts.build_dir), "layout", "--summary-only"]).returncode
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
