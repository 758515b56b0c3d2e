#!/usr/bin/env python3
"""Meta ranks against real ranks: `./memgrad launch -n N` runs of train_mlp and train_charlm with
DDP and ZeRO 1-3 (2 and 3 also overlapping) on sim:0 (Gloo moving real bytes between processes), and the same ranks run one
at a time on meta:0 (RANK and WORLD_SIZE set, no peers, collectives that allocate as Gloo's and
move nothing). Every rank's allocator trace is the same event for event (action, address, size,
allocated, reserved, the phase and op of each), so every peak and every phase's bytes are; and
`./memgrad estimate --ranks N` prints the real ranks' peaks.

usage: meta_ranks_test.py BUILD_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, "build")
MLP = ["train_mlp", "--epochs", "1", "--max-steps", "2", "--batch-size", "256"]
CHARLM = ["train_charlm", "--steps", "2", "--sample-length", "0", "--batch-size", "8"]
LIMIT = "1GiB"
FIELDS = ("action", "addr", "size", "allocated", "reserved", "requested", "stream")


def program(name):
    return os.path.join(BUILD, "examples", name)


def events(path):
    """Each event's fields and the phase and op of its context."""
    with open(path, encoding="utf-8") as f:
        trace = json.load(f)
    contexts = trace["contexts"]
    return [tuple(e[k] for k in FIELDS) + (contexts[e["ctx"]].get("phase"),
                                           contexts[e["ctx"]].get("op"))
            for e in trace["memgrad_events"]]


def real_ranks(world, args, folder):
    """The sim:0 trace of every rank of a launched run."""
    command = [sys.executable, os.path.join(ROOT, "tools", "launch.py"), "--build-dir", BUILD,
               "-n", str(world), "--", program(args[0])] + args[1:] + [
                   "--device", "sim:0", "--memory-limit", LIMIT]
    env = dict(os.environ, MEMGRAD_TRACE=os.path.join(folder, "real.{rank}.json"))
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [events(os.path.join(folder, f"real.{r}.sim0.json")) for r in range(world)]


def meta_rank(rank, world, args, folder):
    """The meta:0 trace of rank `rank` of `world`, run alone."""
    path = os.path.join(folder, f"meta.{rank}.json")
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), MEMGRAD_TRACE=path)
    proc = subprocess.run([program(args[0])] + args[1:] + [
        "--device", "meta:0", "--memory-limit", LIMIT, "--backend", "gloo"],
        capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return events(os.path.join(folder, f"meta.{rank}.meta0.json"))


class MetaRanksTest(unittest.TestCase):
    def check_ranks(self, world, args):
        with tempfile.TemporaryDirectory() as folder:
            real = real_ranks(world, args, folder)
            for rank in range(world):
                meta = meta_rank(rank, world, args, folder)
                self.assertEqual(len(meta), len(real[rank]), f"rank {rank}")
                for i, (m, r) in enumerate(zip(meta, real[rank])):
                    self.assertEqual(m, r, f"rank {rank}, event {i + 1}")
        return real

    def test_ddp_on_2_ranks(self):
        self.check_ranks(2, MLP + ["--ddp"])

    def test_ddp_on_4_ranks_checkpointed_and_accumulating(self):
        self.check_ranks(4, MLP[:-1] + ["512", "--ddp", "--checkpoint-segments", "2",
                                         "--accumulate", "2"])

    def test_zero_1_on_2_and_4_ranks(self):
        self.check_ranks(2, MLP + ["--zero", "1"])
        self.check_ranks(4, MLP + ["--zero", "1", "--optimizer", "sgd"])

    def test_zero_2_on_2_and_4_ranks_on_expandable_segments(self):
        self.check_ranks(2, MLP + ["--zero", "2"])
        self.check_ranks(4, MLP + ["--zero", "2", "--alloc-policy", "expandable"])

    def test_zero_3_on_2_and_4_ranks(self):
        self.check_ranks(2, MLP + ["--zero", "3"])
        self.check_ranks(4, MLP + ["--zero", "3", "--optimizer", "sgd"])

    def test_zero_2_and_3_overlapping_on_2_and_4_ranks(self):
        # Communication on the communication thread: the allocations stay on the rank's own
        # thread, in the same order on meta as on real ranks.
        self.check_ranks(2, MLP + ["--zero", "2", "--zero-overlap"])
        self.check_ranks(4, MLP + ["--zero", "3", "--zero-overlap"])

    def test_transformer_ddp_and_zero_3(self):
        self.check_ranks(2, CHARLM + ["--ddp"])
        self.check_ranks(4, CHARLM + ["--zero", "3"])

    def test_estimate_prints_the_real_ranks_peaks(self):
        args = MLP + ["--zero", "2"]
        with tempfile.TemporaryDirectory() as folder:
            real = real_ranks(2, args, folder)
        proc = subprocess.run(
            [sys.executable, os.path.join(ROOT, "tools", "estimate.py"), "--build-dir", BUILD,
             "--device-memory", LIMIT, "--ranks", "2", "--backend", "gloo"] + args,
            capture_output=True, text=True, timeout=600, cwd=ROOT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("fits: yes", proc.stdout)
        for label, field in (("allocated", 3), ("reserved", 4)):
            value = max(e[field] for r in real for e in r)
            self.assertEqual({max(e[field] for e in r) for r in real}, {value})
            printed = re.search(rf"^peak {label} \(ranks 0-1\): ([\d,]+) B", proc.stdout, re.M)
            self.assertIsNotNone(printed, proc.stdout)
            self.assertEqual(int(printed.group(1).replace(",", "")), value)


if __name__ == "__main__":
    unittest.main()
