#!/usr/bin/env python3
"""Tests of tools/validate_snapshot.py on hand-built snapshots in PyTorch's format: one valid
history, and one violation of each rule the viewer relies on."""
import copy
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import validate_snapshot  # noqa: E402

MiB = 1 << 20


def event(action, addr, size, **extra):
    return dict({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": 0,
                 "frames": []}, **extra)


def valid_snapshot():
    """A 2 MiB segment: a (512 B) allocated and freed, b (1024 B) still allocated, c (512 B)
    freed with free_requested/free_completed; the final state holds b only."""
    base = 0x7F0000000000
    return {
        "segments": [{
            "device": 0, "address": base, "total_size": 2 * MiB, "allocated_size": 1024,
            "active_size": 1024, "requested_size": 1000, "stream": 0, "segment_type": "small",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
            "blocks": [
                {"address": base, "size": 512, "requested_size": 512, "state": "inactive"},
                {"address": base + 512, "size": 1024, "requested_size": 1000,
                 "state": "active_allocated", "frames": []},
                {"address": base + 1536, "size": 2 * MiB - 1536, "requested_size": 0,
                 "state": "inactive"},
            ],
        }],
        "device_traces": [[
            event("segment_alloc", base, 2 * MiB),
            event("alloc", base, 512),
            event("alloc", base + 512, 1000),
            event("free_requested", base, 512),
            event("free_completed", base, 512),
            event("alloc", base + 1536, 512),
            event("free_completed", base + 1536, 512),
        ]],
        "allocator_settings": {"expandable_segments": False},
    }


class ValidateSnapshot(unittest.TestCase):
    def errors(self, snapshot):
        return validate_snapshot.validate(snapshot)

    def test_a_consistent_history_is_valid(self):
        self.assertEqual(self.errors(valid_snapshot()), [])

    def test_blocks_must_sum_to_the_segment(self):
        s = valid_snapshot()
        s["segments"][0]["blocks"][2]["size"] -= 512
        self.assertTrue(any(e.startswith("blocks: segment 0") and "sum to" in e
                            for e in self.errors(s)))

    def test_a_block_with_frames_needs_requested_size(self):
        s = valid_snapshot()
        del s["segments"][0]["blocks"][1]["requested_size"]
        self.assertIn("blocks: segment 0 block 1 has frames but no requested_size",
                      self.errors(s))

    def test_a_segment_needs_its_device(self):
        s = valid_snapshot()
        del s["segments"][0]["device"]
        self.assertEqual(self.errors(s), ["keys: segment 0 has no `device`"])

    def test_an_oom_needs_device_free(self):
        s = valid_snapshot()
        s["device_traces"][0].append(event("oom", 0, 4 * MiB))
        del s["device_traces"][0][-1]["addr"]
        self.assertEqual(self.errors(s), ["keys: device 0 event 7 (oom) has no `device_free`"])

    def test_a_block_freed_outside_any_segment_is_reported(self):
        s = valid_snapshot()
        s["device_traces"][0][6] = event("free_completed", 0x10, 512)
        s["device_traces"][0][5] = event("alloc", 0x10, 512)
        self.assertTrue(any("lies in no live segment" in e for e in self.errors(s)))

    def test_a_segment_alloc_must_match_a_live_segment(self):
        s = valid_snapshot()
        s["device_traces"][0][0]["addr"] += 4096
        self.assertTrue(any("no live segment starts at this address" in e
                            for e in self.errors(s)))

    def test_a_free_of_a_block_never_allocated_in_a_segment_that_does_not_exist_yet(self):
        s = valid_snapshot()
        # The segment is allocated after the alloc inside it: walking back, the block is live
        # while its segment is not.
        trace = s["device_traces"][0]
        trace[0], trace[1] = trace[1], trace[0]
        self.assertTrue(any("lies in the segment before it exists" in e for e in self.errors(s)))

    def test_free_requested_must_name_a_live_block(self):
        s = valid_snapshot()
        s["device_traces"][0].append(event("free_requested", 0x7F0000000000 + 4096, 512))
        self.assertTrue(any("free_requested" in e and "no live block" in e
                            for e in self.errors(s)))

    def test_a_trailing_free_requested_matches_a_pending_block(self):
        s = valid_snapshot()
        s["segments"][0]["blocks"][1]["state"] = "active_pending_free"
        s["device_traces"][0].append(event("free_requested", 0x7F0000000000 + 512, 1000))
        self.assertEqual(self.errors(s), [])

    def test_a_final_snapshot_entry_records_the_active_bytes(self):
        s = valid_snapshot()
        trace = s["device_traces"][0]
        trace.append(event("snapshot", 0, 1024))  # b's block, 1024 B, is the one active
        self.assertEqual(self.errors(s), [])
        trace[-1]["size"] = 1000  # b's requested bytes, not its block's
        self.assertEqual(self.errors(s), [
            "markers: device 0 event 7 (snapshot): size 1000, but the final segments hold 1024 "
            "active bytes and no alloc or free follows it"])
        trace[-1]["addr"] = 0x7F0000000000
        trace[-1]["size"] = 1024
        self.assertEqual(self.errors(s), [
            "markers: device 0 event 7 (snapshot): addr is 0x7f0000000000, PyTorch records 0"])

    def test_an_earlier_snapshot_entry_is_not_held_to_the_final_state(self):
        s = valid_snapshot()
        s["device_traces"][0].insert(3, event("snapshot", 0, 1536))  # a and b active then
        self.assertEqual(self.errors(s), [])
        s["device_traces"][0][3]["size"] = -1
        self.assertTrue(any("size is -1" in e for e in self.errors(s)))

    def test_categories_need_one_unknown(self):
        s = valid_snapshot()
        for e in s["device_traces"][0]:
            e["category"] = "forward"
        self.assertTrue(any(e.startswith("category:") for e in self.errors(s)))
        s["device_traces"][0][0]["category"] = "unknown"
        self.assertEqual(self.errors(s), [])

    def test_expandable_maps_grow_and_shrink_a_segment(self):
        base = 0x7F0000000000
        s = {
            "segments": [{"device": 0, "address": base, "total_size": 2 * MiB, "stream": 0,
                          "is_expandable": True,
                          "blocks": [{"size": 2 * MiB, "requested_size": 2 * MiB,
                                      "state": "active_allocated"}]}],
            "device_traces": [[
                event("segment_map", base, 2 * MiB),
                event("segment_map", base + 2 * MiB, 2 * MiB),
                event("alloc", base, 2 * MiB),
                event("alloc", base + 2 * MiB, 2 * MiB),
                event("free_completed", base + 2 * MiB, 2 * MiB),
                event("segment_unmap", base + 2 * MiB, 2 * MiB),
            ]],
        }
        self.assertEqual(self.errors(s), [])
        broken = copy.deepcopy(s)
        del broken["device_traces"][0][5]  # the block's pages never unmapped: a map overlaps
        self.assertTrue(any("segment_map" in e for e in self.errors(broken)))

    def test_the_command_line_reads_pickle_and_json_and_refuses_globals(self):
        tool = os.path.join(HERE, "..", "..", "tools", "validate_snapshot.py")
        with tempfile.TemporaryDirectory() as d:
            for name, data in (("s.pickle", pickle.dumps(valid_snapshot(), protocol=4)),
                               ("s.json", json.dumps(valid_snapshot()).encode())):
                path = os.path.join(d, name)
                with open(path, "wb") as f:
                    f.write(data)
                out = subprocess.run([sys.executable, tool, path], capture_output=True,
                                     text=True)
                self.assertEqual(out.returncode, 0, out.stdout)
                self.assertIn("valid (1 segments, 7 events, 1 device traces)", out.stdout)
            evil = os.path.join(d, "evil.pickle")
            with open(evil, "wb") as f:
                f.write(pickle.dumps(ValueError("x")))
            out = subprocess.run([sys.executable, tool, evil], capture_output=True, text=True)
            self.assertEqual(out.returncode, 1)
            self.assertIn("refusing global", out.stdout)


if __name__ == "__main__":
    unittest.main()
