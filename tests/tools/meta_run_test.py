#!/usr/bin/env python3
"""train_mlp and train_charlm on meta:0 against the same runs on sim:0: every byte the programs
report (the first step phase by phase, the steady state, the memory summary) is identical; only
the lines that carry values (losses, accuracies, times, the sample) and the device's name
differ. Configurations: plain, checkpointed, accumulating, on the expandable and planned
policies, and one that runs out of memory. Not --amp: a real run's GradScaler skips a step when
its float16 gradients overflow, which depends on values (train_mlp --amp does on one OpenMP
thread and not on two), while a meta run assumes no overflow; tests/nn/meta_test.cpp checks
autocast itself, without a scaler. The behaviour examples that print only bytes print the same
on meta:0; those that also compare values stop at their first read of one with a DeviceError
naming the op. compare_memgrad's transformer step estimated on meta:0 is its real step on sim:0.

usage: meta_run_test.py BUILD_DIR
"""
import os
import re
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, "build")
TRAIN_MLP = [os.path.join(BUILD, "examples", "train_mlp"), "--epochs", "1", "--max-steps", "3"]
TRAIN_CHARLM = [os.path.join(BUILD, "examples", "train_charlm"), "--steps", "3",
                "--sample-length", "0"]

# Lines with values, which a meta run does not have: progress bars, accuracies, losses and the
# sample (its prompt, or why there is none).
VALUE_LINES = re.compile(r"^(epoch \d+/\d+ \[|final test accuracy|no accuracy on meta|"
                         r"training \[|validation loss|The $|\(none: meta)")


def run(device, args, limit, program):
    proc = subprocess.run(program + ["--device", device, "--memory-limit", limit] + args,
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    # The summary's title is centred, so its spacing follows the device's name.
    lines = [re.sub(" +", " ", line.replace(device, "DEVICE"))
             for line in proc.stdout.splitlines() if not VALUE_LINES.match(line)]
    text = "\n".join(lines)
    return proc.returncode, text, proc.stderr.replace(device, "DEVICE")


class MetaAgainstSimTest(unittest.TestCase):
    def check_same(self, args, limit="256MiB", program=TRAIN_MLP):
        sim_rc, sim_out, sim_err = run("sim:0", args, limit, program)
        meta_rc, meta_out, meta_err = run("meta:0", args, limit, program)
        self.assertEqual(meta_rc, sim_rc, meta_err)
        self.assertEqual(meta_err, sim_err)
        self.assertEqual(meta_out, sim_out)
        return sim_rc, sim_out, sim_err

    def test_plain(self):
        rc, out, _ = self.check_same([])
        self.assertEqual(rc, 0)
        self.assertIn("peak during the step, above its start", out)
        self.assertIn("Reserved memory", out)

    def test_checkpointed(self):
        self.assertEqual(self.check_same(["--checkpoint-segments", "2"])[0], 0)

    def test_accumulating_with_sgd(self):
        self.assertEqual(self.check_same(["--accumulate", "4", "--optimizer", "sgd"])[0], 0)

    def test_expandable_segments(self):
        self.assertEqual(self.check_same(["--alloc-policy", "expandable"])[0], 0)

    def test_planned_policy(self):
        rc, out, _ = self.check_same(["--alloc-policy", "planned"])
        self.assertEqual(rc, 0)
        self.assertIn("planned:", out)  # the plan was made and served (the summary's line)

    def test_transformer(self):
        rc, out, _ = self.check_same([], program=TRAIN_CHARLM)
        self.assertEqual(rc, 0)
        self.assertIn("saved", out)

    def test_transformer_checkpointed_with_expandable_segments(self):
        args = ["--checkpoint-segments", "2", "--alloc-policy", "expandable"]
        self.assertEqual(self.check_same(args, program=TRAIN_CHARLM)[0], 0)

    def test_out_of_memory_at_the_same_request(self):
        rc, _, err = self.check_same([], limit="4MiB")
        self.assertEqual(rc, 1)
        self.assertIn("out of memory", err.lower())


# The behaviour examples whose output is all bytes: on meta:0 they print what they print on sim:0.
# The others compare values too (outputs equal, losses, a file's bytes), which a meta device has
# not: they stop at the first such read with a DeviceError naming the op (checked below). B4, B21
# and B23 choose their own devices.
SAME_ON_META = ["b01", "b02", "b03", "b05", "b08", "b12", "b15", "b16", "b19", "b20", "b22"]
READ_VALUES = {"b06": "to_vector", "b07": "item", "b09": "item", "b10": "item", "b11": "item",
               "b13": "item", "b14": "item", "b17": "to", "b18": "to_vector"}


def behaviour(prefix):
    folder = os.path.join(BUILD, "examples", "behaviours")
    return os.path.join(folder, next(n for n in sorted(os.listdir(folder))
                                     if n.startswith(prefix + "_") and "." not in n))


class BehavioursOnMetaTest(unittest.TestCase):
    def run_on(self, name, device):
        proc = subprocess.run([behaviour(name), "--device", device], capture_output=True,
                              text=True, timeout=300, cwd=ROOT)
        text = re.sub(" +", " ", (proc.stdout + proc.stderr).replace(device, "DEVICE"))
        return proc.returncode, text

    def test_behaviours_print_the_same_bytes_on_meta(self):
        for name in SAME_ON_META:
            with self.subTest(name):
                sim = self.run_on(name, "sim:0")
                self.assertEqual(sim[0], 0, sim[1][-2000:])
                self.assertEqual(self.run_on(name, "meta:0"), sim)

    def test_behaviours_that_read_values_stop_at_the_read(self):
        for name, op in READ_VALUES.items():
            with self.subTest(name):
                rc, text = self.run_on(name, "meta:0")
                self.assertEqual(rc, 1, text[-2000:])
                self.assertIn(f"error: [{op}] a tensor on DEVICE has a shape", text)


class GpuComparisonSmokeTest(unittest.TestCase):
    """compare_memgrad (the GPU kit's comparison with PyTorch) on sim:0: its STEP estimate rows,
    run on meta:0, are its real STEP rows."""

    def test_the_estimate_rows_are_the_real_rows(self):
        import json
        proc = subprocess.run(
            [os.path.join(BUILD, "examples", "gpu", "compare_memgrad"), "--device", "sim:0",
             "--skip-timings", "--deep-width", "256", "--step-width", "64", "--step-layers", "2",
             "--step-heads", "4", "--step-context", "64", "--step-batch", "4"],
            capture_output=True, text=True, timeout=300, cwd=ROOT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        phases = json.loads(proc.stdout)["phases"]
        real = [p for p in phases if p["behaviour"] == "STEP"]
        estimate = [p for p in phases if p["behaviour"] == "STEP estimate"]
        self.assertEqual(len(real), 6)
        for r, e in zip(real, estimate):
            self.assertEqual({**r, "behaviour": ""}, {**e, "behaviour": ""})


if __name__ == "__main__":
    unittest.main()
