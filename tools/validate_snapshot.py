#!/usr/bin/env python3
"""Checks a memory snapshot (PyTorch's torch.cuda.memory._snapshot() structure, as pickle or
JSON) against the rules PyTorch's viewer (pytorch.org/memory_viz, torch/utils/viz/MemoryViz.js)
relies on. A snapshot that breaks one fails to load there or draws wrong; each rule below is
one place where the viewer would throw or mislead:

  keys      the top level has `segments` (a list) and `device_traces` (a list of lists); each
            segment has device, address, total_size, stream and blocks; each block size and
            state; each trace entry action, addr (oom: device_free), size and stream.
  blocks    a segment's blocks are contiguous from its address (the viewer recomputes each
            block's address as the running sum of sizes) and their sizes sum to total_size;
            states are active_allocated, active_pending_free or inactive; a block with frames
            has requested_size.
  history   walking each device's trace back from the final `segments` (as the viewer's
            "Allocator State History" does), every live block lies inside a live segment at
            every step; each segment_alloc undoes an existing segment of exactly that address,
            each segment_map lies inside one; each free_requested names a live block (the
            viewer sets a flag on it); nothing is freed twice.
  markers   each `snapshot` entry (one per _snapshot() taken while history is recorded) has
            addr 0 and a size >= 0, as PyTorch records it; the last one, when no alloc or free
            follows it, records the active bytes of the final segments (the sizes of their
            active_allocated and active_pending_free blocks), which PyTorch's snapshot() reads
            right before recording it. The viewer lists it in the state history at that addr.
  category  if any event has a `category`, one of them is "unknown" (the viewer's
            annotate_snapshot pushes to a misspelled list otherwise and the file fails to load).

usage: tools/validate_snapshot.py FILE [--quiet]
Exits 0 and prints a summary when every rule holds, 1 and one line per violation otherwise.
"""
import bisect
import json
import pickle
import sys

ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot", "user_defined"}
STATES = {"active_allocated", "active_pending_free", "inactive"}


class Restricted(pickle.Unpickler):
    """Builtin values only: a snapshot never needs a class."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing global {module}.{name}")


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:1] == b"\x80":
        import io
        return Restricted(io.BytesIO(data)).load()
    return json.loads(data.decode("utf-8"))


class Spans:
    """Disjoint [start, end) ranges kept sorted by start."""

    def __init__(self):
        self.starts, self.ends = [], []

    def add(self, start, end, merge=False):
        """Adds [start, end); with `merge`, joins it to ranges it touches (the viewer merges
        the pages of an expandable segment back into one range)."""
        i = bisect.bisect_left(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, end)
        if not merge:
            return
        if i + 1 < len(self.starts) and self.starts[i + 1] == self.ends[i]:
            self.ends[i] = self.ends[i + 1]
            self.remove(i + 1)
        if i > 0 and self.ends[i - 1] == self.starts[i]:
            self.ends[i - 1] = self.ends[i]
            self.remove(i)

    def containing(self, start, end):
        """Index of the range holding [start, end), or None."""
        i = bisect.bisect_right(self.starts, start) - 1
        if i >= 0 and self.starts[i] <= start and end <= self.ends[i]:
            return i
        return None

    def remove(self, i):
        del self.starts[i]
        del self.ends[i]

    def overlapping(self, start, end):
        """Whether any range overlaps [start, end)."""
        i = bisect.bisect_right(self.starts, start) - 1
        i = max(i, 0)
        while i < len(self.starts) and self.starts[i] < end:
            if self.ends[i] > start:
                return True
            i += 1
        return False


def check_keys(snapshot, errors):
    if not isinstance(snapshot, dict):
        errors.append("keys: the snapshot is not a dict")
        return False
    if not isinstance(snapshot.get("segments"), list):
        errors.append("keys: no `segments` list")
        return False
    traces = snapshot.get("device_traces")
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        errors.append("keys: no `device_traces` list of lists")
        return False
    for n, seg in enumerate(snapshot["segments"]):
        for key in ("device", "address", "total_size", "stream", "blocks"):
            if key not in seg:
                errors.append(f"keys: segment {n} has no `{key}`")
                return False
        for b, block in enumerate(seg["blocks"]):
            for key in ("size", "state"):
                if key not in block:
                    errors.append(f"keys: segment {n} block {b} has no `{key}`")
                    return False
    for device, trace in enumerate(traces):
        for i, e in enumerate(trace):
            needed = ("action", "size", "stream") + (("device_free",) if e.get("action") == "oom"
                                                     else ("addr",))
            for key in needed:
                if key not in e:
                    errors.append(f"keys: device {device} event {i} ({e.get('action')}) has no "
                                  f"`{key}`")
                    return False
            if e["action"] not in ACTIONS:
                errors.append(f"keys: device {device} event {i}: unknown action {e['action']!r}")
    return True


def check_blocks(snapshot, errors):
    for n, seg in enumerate(snapshot["segments"]):
        total = sum(b["size"] for b in seg["blocks"])
        if total != seg["total_size"]:
            errors.append(f"blocks: segment {n} at {seg['address']:#x}: block sizes sum to {total}, "
                          f"total_size is {seg['total_size']}")
        for b, block in enumerate(seg["blocks"]):
            if block["state"] not in STATES:
                errors.append(f"blocks: segment {n} block {b}: unknown state {block['state']!r}")
            if "frames" in block and "requested_size" not in block:
                errors.append(f"blocks: segment {n} block {b} has frames but no requested_size")
            if block["size"] <= 0:
                errors.append(f"blocks: segment {n} block {b} has size {block['size']}")


def elided(trace):
    """The trace as the viewer reads it: free_requested directly followed by free_completed of
    the same address becomes one `free`."""
    out = []
    for e in trace:
        if (e["action"] == "free_completed" and out and out[-1]["action"] == "free_requested"
                and out[-1]["addr"] == e["addr"]):
            out[-1] = dict(out[-1], action="free")
            continue
        out.append(e)
    return out


def check_history(snapshot, errors):
    for device, trace in enumerate(snapshot["device_traces"]):
        segments = Spans()
        blocks = {}  # address -> (end, pending)
        for seg in snapshot["segments"]:
            if seg["device"] != device:
                continue
            segments.add(seg["address"], seg["address"] + seg["total_size"])
            addr = seg["address"]
            for block in seg["blocks"]:
                if block["state"] in ("active_allocated", "active_pending_free"):
                    blocks[addr] = (addr + block["size"], block["state"] == "active_pending_free")
                addr += block["size"]
        events = elided(trace)
        for i in range(len(events) - 1, -1, -1):
            e = events[i]
            where = f"history: device {device} event {i} ({e['action']} {e.get('addr', 0):#x})"
            action = e["action"]
            if action in ("free", "free_completed"):
                if e["addr"] in blocks:
                    errors.append(f"{where}: the block is freed again before it was allocated")
                end = e["addr"] + e["size"]
                if segments.containing(e["addr"], end) is None:
                    errors.append(f"{where}: the block [{e['addr']:#x}, {end:#x}) lies in no live "
                                  f"segment before this event")
                blocks[e["addr"]] = (end, action == "free_completed")
            elif action == "free_requested":
                if e["addr"] not in blocks:
                    errors.append(f"{where}: no live block at this address")
                else:
                    blocks[e["addr"]] = (blocks[e["addr"]][0], False)
            elif action == "alloc":
                if e["addr"] not in blocks:
                    errors.append(f"{where}: the block allocated here is not live afterwards")
                blocks.pop(e["addr"], None)
            elif action in ("segment_free", "segment_unmap"):
                start, end = e["addr"], e["addr"] + e["size"]
                if segments.overlapping(start, end):
                    errors.append(f"{where}: the range overlaps a live segment")
                segments.add(start, end, merge=action == "segment_unmap")
            elif action == "segment_alloc":
                i_seg = bisect.bisect_left(segments.starts, e["addr"])
                if i_seg == len(segments.starts) or segments.starts[i_seg] != e["addr"]:
                    errors.append(f"{where}: no live segment starts at this address")
                    continue
                start, end = segments.starts[i_seg], segments.ends[i_seg]
                segments.remove(i_seg)
                if any(start <= a < end for a in blocks):
                    errors.append(f"{where}: a live block lies in the segment before it exists")
            elif action == "segment_map":
                start, end = e["addr"], e["addr"] + e["size"]
                i_seg = segments.containing(start, end)
                if i_seg is None:
                    errors.append(f"{where}: the mapped range lies in no live segment")
                    continue
                s_start, s_end = segments.starts[i_seg], segments.ends[i_seg]
                segments.remove(i_seg)
                if s_start < start:
                    segments.add(s_start, start)
                if end < s_end:
                    segments.add(end, s_end)
                if any(start <= a < end for a in blocks):
                    errors.append(f"{where}: a live block lies in the range before it is mapped")


def check_markers(snapshot, errors):
    for device, trace in enumerate(snapshot["device_traces"]):
        last = None  # the last snapshot entry, while no alloc or free follows it
        for i, e in enumerate(trace):
            if e["action"] in ("alloc", "free_requested", "free_completed"):
                last = None
            if e["action"] != "snapshot":
                continue
            where = f"markers: device {device} event {i} (snapshot)"
            if e["addr"] != 0:
                errors.append(f"{where}: addr is {e['addr']:#x}, PyTorch records 0")
            if not isinstance(e["size"], int) or e["size"] < 0:
                errors.append(f"{where}: size is {e['size']!r}, expected the active bytes")
                continue
            last = (i, e["size"])
        if last is None:
            continue
        active = sum(block["size"] for seg in snapshot["segments"] if seg["device"] == device
                     for block in seg["blocks"]
                     if block["state"] in ("active_allocated", "active_pending_free"))
        if last[1] != active:
            errors.append(f"markers: device {device} event {last[0]} (snapshot): size {last[1]}, "
                          f"but the final segments hold {active} active bytes and no alloc or "
                          f"free follows it")


def check_categories(snapshot, errors):
    categories = {e["category"] for trace in snapshot["device_traces"] for e in trace
                  if "category" in e}
    if categories and "unknown" not in categories:
        errors.append("category: events have categories but none is \"unknown\" (the viewer "
                      "fails to load such a file)")


def validate(snapshot):
    """The violations of `snapshot`, one line each (empty: valid)."""
    errors = []
    if check_keys(snapshot, errors):
        check_blocks(snapshot, errors)
        check_history(snapshot, errors)
        check_markers(snapshot, errors)
        check_categories(snapshot, errors)
    return errors


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    try:
        snapshot = load(args[0])
    except (OSError, ValueError, pickle.UnpicklingError, EOFError) as e:
        print(f"{args[0]}: cannot read: {e}")
        return 1
    errors = validate(snapshot)
    for line in errors:
        print(f"{args[0]}: {line}")
    if not errors and "--quiet" not in sys.argv:
        events = sum(len(t) for t in snapshot["device_traces"])
        print(f"{args[0]}: valid ({len(snapshot['segments'])} segments, {events} events, "
              f"{len(snapshot['device_traces'])} device traces)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
