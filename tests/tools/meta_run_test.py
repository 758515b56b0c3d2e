#!/usr/bin/env python3
"""train_mlp on meta:0 against the same run on sim:0: every byte the program reports (the first
step phase by phase, the steady state, the memory summary) is identical; only the lines that
carry values (losses, accuracies, times) and the device's name differ. Configurations: plain,
checkpointed, under autocast with a GradScaler, accumulating, on the expandable policy, and one
that runs out of memory.

usage: meta_run_test.py BUILD_DIR
"""
import os
import re
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, "build")
TRAIN_MLP = os.path.join(BUILD, "examples", "train_mlp")
COMMON = ["--epochs", "1", "--max-steps", "3"]

# Lines with values, which a meta run does not have: the progress bar and the accuracy.
VALUE_LINES = re.compile(r"^(epoch \d+/\d+ \[|final test accuracy|no accuracy on meta)")


def run(device, args, limit):
    proc = subprocess.run([TRAIN_MLP, "--device", device, "--memory-limit", limit] + COMMON + args,
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    # The summary's title is centred, so its spacing follows the device's name.
    lines = [re.sub(" +", " ", line.replace(device, "DEVICE"))
             for line in proc.stdout.splitlines() if not VALUE_LINES.match(line)]
    text = "\n".join(lines)
    return proc.returncode, text, proc.stderr.replace(device, "DEVICE")


class MetaAgainstSimTest(unittest.TestCase):
    def check_same(self, args, limit="256MiB"):
        sim_rc, sim_out, sim_err = run("sim:0", args, limit)
        meta_rc, meta_out, meta_err = run("meta:0", args, limit)
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

    def test_autocast_with_a_grad_scaler(self):
        self.assertEqual(self.check_same(["--amp"])[0], 0)

    def test_accumulating_with_sgd(self):
        self.assertEqual(self.check_same(["--accumulate", "4", "--optimizer", "sgd"])[0], 0)

    def test_expandable_segments(self):
        self.assertEqual(self.check_same(["--alloc-policy", "expandable"])[0], 0)

    def test_out_of_memory_at_the_same_request(self):
        rc, _, err = self.check_same([], limit="4MiB")
        self.assertEqual(rc, 1)
        self.assertIn("out of memory", err.lower())


if __name__ == "__main__":
    unittest.main()
