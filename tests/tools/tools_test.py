#!/usr/bin/env python3
"""End-to-end tests of the programs' bad-input paths: a trace that cannot be written, lab
commands with bad flags or traces, training flags checked before training. Each must end with a
one-line error and a non-zero status, never a traceback, an abort or a silent success. And one
good path the flags open: a training run on the planned policy reports its steady state.

usage: tools_test.py BUILD_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, "build")
LAB = os.path.join(BUILD, "lab", "cli", "lab_replay")
B01 = os.path.join(BUILD, "examples", "behaviours", "b01_allocated_vs_reserved")
TRAIN_MLP = os.path.join(BUILD, "examples", "train_mlp")
MNIST = "/usr/share/datasets/fashion-mnist"


def run(args, env=None, timeout=120):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=dict(os.environ, **(env or {})))


class TraceFileTest(unittest.TestCase):
    def test_a_trace_that_cannot_be_written_fails_the_program(self):
        proc = run([B01], env={"MEMGRAD_TRACE": "/proc/memgrad-no-such-dir/t.json"})
        self.assertEqual(proc.returncode, 3, proc.stderr)
        self.assertIn("MEMGRAD_TRACE", proc.stderr)
        self.assertIn("cannot write", proc.stderr)

    def test_a_trace_is_written_whole_and_nothing_else(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            proc = run([B01], env={"MEMGRAD_TRACE": path})
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with open(path, encoding="utf-8") as f:
                self.assertIn("memgrad_events", json.load(f))
            self.assertEqual(os.listdir(d), ["t.json"])

    def test_lab_record_reports_a_trace_it_could_not_write(self):
        proc = run([sys.executable, os.path.join(ROOT, "lab", "cli", "lab.py"), "--build-dir", BUILD,
                    "record", "--out", "/proc/memgrad-no-such-dir/t.json", "--", B01])
        self.assertNotEqual(proc.returncode, 0)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertNotIn("trace: ", proc.stdout)


class LabFlagsTest(unittest.TestCase):
    TRACE = os.path.join(ROOT, "traces", "mlp_step.json")

    def check_error(self, args, text):
        proc = run([LAB] + args)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn(text, proc.stderr + proc.stdout)
        self.assertNotIn("terminate called", proc.stderr)

    def test_capacities_without_a_size_value_are_errors(self):
        for capacity in ("inf", "1e30", "8589934592G", "nan", "0"):
            with self.subTest(capacity=capacity):
                self.check_error(["replay", self.TRACE, "--capacity", capacity], "--capacity")

    def test_a_policy_list_without_a_name_is_an_error(self):
        self.check_error(["replay", self.TRACE, "--policy", ",,,"], "names no policy")

    def test_negative_timed_passes_are_an_error(self):
        proc = run([LAB, "replay", self.TRACE, "--timed-passes", "-3"])
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--timed-passes", proc.stderr + proc.stdout)

    def test_an_output_folder_that_cannot_be_made_is_an_error(self):
        self.check_error(["plot", self.TRACE, "--out-dir", "/proc/memgrad-forbidden"],
                         "cannot create the folder")
        self.check_error(["layout", "--out-dir", "/proc/memgrad-forbidden"],
                         "cannot create the folder")

    def test_malformed_traces_are_errors_naming_the_field(self):
        with open(self.TRACE, encoding="utf-8") as f:
            doc = json.load(f)
        cases = [("requested", -1, '"requested" is -1'),
                 ("requested", 2 ** 62, "expected an integer in [0, 1152921504606846976]"),
                 ("t_ns", -5, '"t_ns" is -5'),
                 ("reserved", 2 ** 63 - 1, '"reserved" is 9223372036854775807')]
        with tempfile.TemporaryDirectory() as d:
            for key, value, text in cases:
                with self.subTest(key=key, value=value):
                    bad = json.loads(json.dumps(doc))
                    bad["memgrad_events"][0][key] = value
                    path = os.path.join(d, "bad.json")
                    with open(path, "w", encoding="utf-8") as f:
                        json.dump(bad, f)
                    self.check_error(["replay", path], text)
                    self.check_error(["plot", path, "--out-dir", d], text)

    def test_one_huge_request_says_what_capacity_it_needs(self):
        with open(self.TRACE, encoding="utf-8") as f:
            doc = json.load(f)
        doc["memgrad_events"][0]["requested"] = 2 ** 60
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "huge.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            self.check_error(["replay", path], "more than a simulated device can have")


@unittest.skipUnless(os.path.isdir(MNIST), f"needs {MNIST} (dataset-fashion-mnist)")
class TrainingFlagsTest(unittest.TestCase):
    def test_a_batch_larger_than_the_data_fails_before_training(self):
        proc = run([TRAIN_MLP, "--batch-size", "100000000", "--epochs", "1"])
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--batch-size 100000000 is more than the 60000 training examples",
                      proc.stderr)

    def test_a_save_path_in_a_missing_folder_fails_before_training(self):
        proc = run([TRAIN_MLP, "--save", "/tmp/memgrad-no-such-dir/ckpt.safetensors"])
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("does not exist", proc.stderr)
        self.assertNotIn("epoch 1/", proc.stdout)

    def test_an_unknown_alloc_policy_fails_before_training(self):
        proc = run([TRAIN_MLP, "--alloc-policy", "nope", "--epochs", "1"])
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("unknown policy 'nope'", proc.stderr)
        self.assertNotIn("epoch 1/", proc.stdout)

    def test_zero_overlap_without_zero_2_or_3_fails_before_training(self):
        for extra in ([], ["--zero", "1"]):
            proc = run([TRAIN_MLP, "--zero-overlap", "--epochs", "1"] + extra)
            self.assertNotEqual(proc.returncode, 0)
            self.assertIn("--zero-overlap overlaps the reduce-scatters of --zero 2 and 3; got "
                          f"--zero {extra[-1] if extra else 0}", proc.stderr)
            self.assertNotIn("epoch 1/", proc.stdout)

    def test_alloc_policy_and_a_policy_in_alloc_conf_are_an_error(self):
        proc = run([TRAIN_MLP, "--alloc-policy", "planned", "--alloc-conf", "policy:arena"])
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("key 'policy' is given twice", proc.stderr)

    def test_planned_reports_its_steady_state_against_caching(self):
        proc = run([TRAIN_MLP, "--alloc-policy", "planned", "--epochs", "1", "--max-steps", "6"],
                   timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("steady state after 6 training steps", proc.stdout)
        self.assertIn("reserved under planned:", proc.stdout)
        self.assertIn("requests from the plan in 4 steps", proc.stdout)
        self.assertIn("reserved under caching:", proc.stdout)


if __name__ == "__main__":
    unittest.main()
