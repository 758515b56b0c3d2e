#!/usr/bin/env python3
"""Regenerates the allocator lab's shipped traces (traces/*.json) from the programs themselves.

  python3 tools/make_traces.py [--build-dir build] [--out-dir traces]

Each trace is recorded with MEMGRAD_TRACE (`./memgrad lab record`) and then cut to the part the
lab is about:
  mlp_step.json       train_mlp, three optimizer steps (batch 64), from the first forward to the
                      end of the last optimizer step (the dataset load is left out)
  charlm_step.json    train_charlm, a small transformer (width 64, 2 layers, context 32, batch 8),
                      three optimizer steps, cut the same way
  fragmentation.json  the fragmenter (batch sizes that change every step), whole run

Cutting keeps the recording's contexts and drops the frees of blocks allocated before the cut
(the batch the data loader made before the first forward), so every free has its alloc. The Chrome-trace part is dropped to keep
the files small (`./memgrad lab plot` writes it again).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from run_example import find_examples  # noqa: E402

PROGRAMS = {
    "mlp_step.json": (["train_mlp", "--epochs", "1", "--max-steps", "3", "--batch-size", "64"],
                      True),
    "charlm_step.json": (["train_charlm", "--steps", "3", "--width", "64", "--layers", "2",
                          "--context", "32", "--batch-size", "8", "--sample-length", "0"], True),
    "fragmentation.json": (["fragmenter", "--steps", "16"], False),
}

STEP_PHASES = ("forward", "backward", "optimizer")


def record(build_dir, argv):
    program = find_examples(build_dir).get(argv[0])
    if program is None:
        sys.exit(f"make_traces: {argv[0]} is not built in {build_dir} (./memgrad build)")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        env = dict(os.environ, MEMGRAD_TRACE=path)
        env.pop("MEMGRAD_ALLOC_CONF", None)
        done = subprocess.run([program] + argv[1:], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.exit(f"make_traces: {' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
        with open(path) as f:
            return json.load(f)


def cut_to_steps(trace):
    """Keeps the events from the first forward to the last event of a training phase."""
    contexts = trace["contexts"]
    events = trace["memgrad_events"]
    in_step = [contexts[e["ctx"]]["phase"] in STEP_PHASES for e in events]
    if not any(in_step):
        sys.exit("make_traces: the trace has no forward/backward/optimizer events")
    first = next(i for i, s in enumerate(in_step)
                 if s and contexts[events[i]["ctx"]]["phase"] == "forward")
    last = max(i for i, s in enumerate(in_step) if s)
    kept, live = [], set()
    for e in events[first:last + 1]:
        if e["action"] == "alloc":
            live.add(e["addr"])
        elif e["action"] in ("free_requested", "free_completed"):
            if e["addr"] not in live:
                continue  # a block from before the cut: not part of the steps
            if e["action"] == "free_completed":
                live.discard(e["addr"])
        kept.append(e)
    trace["memgrad_events"] = kept
    return trace


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out-dir", default=os.path.join(ROOT, "traces"))
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for name, (argv, cut) in PROGRAMS.items():
        trace = record(args.build_dir, argv)
        if cut:
            trace = cut_to_steps(trace)
        trace["traceEvents"] = []
        trace["recorded_by"] = " ".join(argv)
        out = os.path.join(args.out_dir, name)
        with open(out, "w") as f:
            json.dump(trace, f, separators=(",", ":"), sort_keys=True)
            f.write("\n")
        allocs = sum(1 for e in trace["memgrad_events"] if e["action"] == "alloc")
        print(f"{out}: {len(trace['memgrad_events'])} events, {allocs} allocs "
              f"({os.path.getsize(out)} bytes) from `{' '.join(argv)}`")


if __name__ == "__main__":
    main()
