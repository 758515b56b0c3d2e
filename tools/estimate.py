#!/usr/bin/env python3
"""`./memgrad estimate PROGRAM [ARGS] --device-memory SIZE [--policy NAME]`: whether a training
run fits on a device of SIZE, and its peaks, without computing it.

Runs the example PROGRAM (train_mlp, or any example that takes --device and --memory-limit)
with ARGS on meta:0, a device of SIZE whose tensors have shapes and no values
(docs/estimate.md), recording the device's allocator trace, and prints:

  estimate: train_mlp --batch-size 4096 on meta:0, 80.00 GiB, caching
  fits: yes
  peak allocated: 33,739,776 B (32.18 MiB), first at event 412 of 826 (forward, linear)
  peak reserved: 69,206,016 B (66.00 MiB), first at event 20 of 826 (forward, linear)

The peaks are those the same run reaches on a real device of SIZE under the same policy: the
allocator's decisions never depend on values. When the run does not fit, `fits: no` and the
program's out-of-memory message (the op, the request and where the free bytes are) follow.

Exit status: 0 fits, 1 does not fit, 2 bad input (an unknown program, a size that does not
parse, ARGS that choose the device themselves, a program that fails for another reason).
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_example import find_examples, resolve_name  # noqa: E402

DEVICE = "meta:0"
OWNED_FLAGS = ("--device", "--memory-limit", "--alloc-policy")


def human(nbytes):
    value, unit = float(nbytes), "B"
    for next_unit in ("KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024:
            break
        value, unit = value / 1024, next_unit
    return f"{nbytes:,} B ({value:.2f} {unit})" if unit != "B" else f"{nbytes:,} B"


def where(trace, index):
    """'(phase, op)' of the trace event at `index`, as its context names them."""
    context = trace["contexts"][trace["memgrad_events"][index]["ctx"]]
    parts = [p for p in (context.get("phase"), context.get("op")) if p]
    return f" ({', '.join(parts)})" if parts else ""


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


OWN_OPTIONS = ("--device-memory", "--policy", "--build-dir")


def parse(argv):
    """estimate's own options, anywhere on the line, and PROGRAM with the rest of its ARGS."""
    opts = {"--build-dir": "build"}
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
        elif a in ("-h", "--help") and not rest:
            print(__doc__)
            sys.exit(0)
        else:
            rest.append(a)
        i += 1
    if "--device-memory" not in opts:
        raise ValueError("--device-memory SIZE is required (80GiB, 512MiB, a number of bytes)")
    if not rest or rest[0].startswith("-"):
        raise ValueError("name the program to estimate first: estimate PROGRAM [ARGS] "
                         "--device-memory SIZE")
    return opts, rest[0], rest[1:]


def main(argv):
    try:
        opts, program, args = parse(argv)
    except ValueError as e:
        return fail(str(e))
    for flag in OWNED_FLAGS:
        if any(a == flag or a.startswith(flag + "=") for a in args):
            return fail(f"{flag} is estimate's to set (the device is {DEVICE}, its capacity "
                        f"--device-memory, its policy --policy)")
    found = find_examples(opts["--build-dir"])
    name = resolve_name(found, program)
    if name is None:
        return fail(f"unknown program '{program}' (./memgrad example list names them)")
    command = [found[name]] + args + ["--device", DEVICE, "--memory-limit", opts["--device-memory"]]
    if "--policy" in opts:
        command += ["--alloc-policy", opts["--policy"]]
    with tempfile.TemporaryDirectory() as folder:
        trace_path = os.path.join(folder, "trace.json")
        proc = subprocess.run(command, capture_output=True, text=True,
                              env=dict(os.environ, MEMGRAD_TRACE=trace_path))
        device_trace = os.path.join(folder, "trace." + DEVICE.replace(":", "") + ".json")
        trace = None
        for path in (device_trace, trace_path):
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    candidate = json.load(f)
                if candidate.get("device") == DEVICE:
                    trace = candidate
    out_of_memory = trace is not None and any(
        e["action"] == "oom" for e in trace["memgrad_events"])
    if proc.returncode != 0 and not out_of_memory:
        return fail(f"{name} failed (exit {proc.returncode}): {last_message(proc.stderr)}")
    if trace is None:
        return fail(f"{name} left no trace of {DEVICE}: does it take --device?")
    shown = " ".join([name] + args)
    print(f"estimate: {shown} on {DEVICE}, {human(trace['capacity'])}, {trace['policy']}")
    print(f"fits: {'no' if out_of_memory else 'yes'}")
    events = len(trace["memgrad_events"])
    for label, field in (("peak allocated", "allocated"), ("peak reserved", "reserved")):
        value, at = peak(trace, field)
        position = f", first at event {at + 1} of {events}{where(trace, at)}" if at >= 0 else ""
        print(f"{label}: {human(value)}{position}")
    if out_of_memory:
        print(last_message(proc.stderr))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
