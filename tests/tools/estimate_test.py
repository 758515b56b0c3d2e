#!/usr/bin/env python3
"""`./memgrad estimate` (tools/estimate.py): its peaks are those of the same run on a device that
computes (train_mlp on sim:0 of the same capacity, its own allocator trace), byte for byte; a run
that does not fit says so with the out-of-memory message; --max-batch finds the batch a real run
fits and one more does not; the model states it prints per rank are B22's expectation
(tests/tools/sharding_tool.cpp) for train_charlm's model of several sizes, in float32 and with
master weights, for DDP and ZeRO 1-3 at several N up to 64; bad input is one line and exit 2.

usage: estimate_test.py BUILD_DIR
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
ESTIMATE = os.path.join(ROOT, "tools", "estimate.py")
TRAIN_MLP = os.path.join(BUILD, "examples", "train_mlp")
TRAIN_CHARLM = os.path.join(BUILD, "examples", "train_charlm")
SHARDING_TOOL = os.path.join(BUILD, "tests", "docs", "sharding_tool")
ARGS = ["--epochs", "1", "--max-steps", "2", "--batch-size", "512"]


def estimate(*args):
    return subprocess.run([sys.executable, ESTIMATE, "--build-dir", BUILD] + list(args),
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def sim_peaks(capacity, extra):
    """(peak allocated, peak reserved) of train_mlp on sim:0, from its own trace."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "t.json")
        subprocess.run([TRAIN_MLP, "--device", "sim:0", "--memory-limit", capacity] + ARGS + extra,
                       capture_output=True, text=True, timeout=300, cwd=ROOT, check=True,
                       env=dict(os.environ, MEMGRAD_TRACE=path))
        with open(os.path.join(folder, "t.sim0.json"), encoding="utf-8") as f:
            events = json.load(f)["memgrad_events"]
    return max(e["allocated"] for e in events), max(e["reserved"] for e in events)


def printed_bytes(out, label):
    return int(re.search(rf"^{label}: ([\d,]+) B", out, re.M).group(1).replace(",", ""))


class EstimateTest(unittest.TestCase):
    def check_against_sim(self, extra, policy=None):
        args = ["--device-memory", "512MiB"] + (["--policy", policy] if policy else [])
        proc = estimate(*args, "train_mlp", *ARGS, *extra)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("fits: yes", proc.stdout)
        sim_extra = extra + (["--alloc-policy", policy] if policy else [])
        allocated, reserved = sim_peaks("512MiB", sim_extra)
        self.assertEqual(printed_bytes(proc.stdout, "peak allocated"), allocated)
        self.assertEqual(printed_bytes(proc.stdout, "peak reserved"), reserved)

    def test_peaks_equal_a_real_run(self):
        self.check_against_sim([])

    def test_peaks_equal_a_real_run_checkpointed_with_sgd(self):
        self.check_against_sim(["--checkpoint-segments", "2", "--optimizer", "sgd"])

    def test_peaks_equal_a_real_run_on_expandable_segments(self):
        self.check_against_sim([], policy="expandable")

    def test_a_run_that_does_not_fit(self):
        proc = estimate("--device-memory", "8MiB", "train_mlp", *ARGS)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("fits: no", proc.stdout)
        self.assertIn("meta:0 out of memory. Tried to allocate 20.00 MiB", proc.stdout)
        # Where: the first parameter's allocation, before any phase (op empty).
        self.assertIn("out of memory at event 1 of 1 (empty): train_mlp: error:", proc.stdout)

    def test_the_largest_batch_is_the_largest_a_real_run_fits(self):
        proc = estimate("--device-memory", "32MiB", "train_mlp", "--epochs", "1", "--max-steps",
                        "2", "--max-batch")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        batch = int(re.search(r"^largest batch that fits: (\d+) ", proc.stdout, re.M).group(1))
        self.assertIn(f"--batch-size {batch} on meta:0", proc.stdout)
        for size, status in ((batch, 0), (batch + 1, 1)):  # 1: out of memory
            run = subprocess.run([TRAIN_MLP, "--device", "sim:0", "--memory-limit", "32MiB",
                                  "--epochs", "1", "--max-steps", "2", "--batch-size", str(size)],
                                 capture_output=True, text=True, timeout=300, cwd=ROOT)
            self.assertEqual(run.returncode, status, (size, run.stderr))

    def test_steps_reach_the_program(self):
        proc = estimate("--device-memory", "512MiB", "--steps", "2", "train_mlp",
                        "--batch-size", "512")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("train_mlp --batch-size 512 --epochs 1 --max-steps 2 on meta:0", proc.stdout)
        allocated, reserved = sim_peaks("512MiB", [])
        self.assertEqual(printed_bytes(proc.stdout, "peak allocated"), allocated)
        self.assertEqual(printed_bytes(proc.stdout, "peak reserved"), reserved)

    @unittest.skipUnless(os.path.exists(SHARDING_TOOL) and os.path.exists(TRAIN_CHARLM),
                         "sharding_tool or train_charlm is not built")
    def test_model_states_per_rank_are_b22s_for_any_size_and_n(self):
        # The vocabulary is the text's: train_charlm says it.
        probe = subprocess.run([TRAIN_CHARLM, "--device", "meta:0", "--steps", "1",
                                "--sample-length", "0", "--context", "8", "--width", "16",
                                "--layers", "1", "--heads", "2", "--batch-size", "2"],
                               capture_output=True, text=True, timeout=120, check=True)
        vocab = re.search(r"vocabulary of (\d+)", probe.stdout).group(1)
        cases = [  # width, layers, precision, mode, N (the batch is N x 2 rows)
            (64, 1, "master-bf16", "zero1", 3), (64, 1, "master-bf16", "zero2", 3),
            (64, 1, "master-fp16", "zero3", 5), (96, 2, "master-bf16", "ddp", 2),
            (96, 2, "fp32", "zero2", 4), (32, 1, "master-bf16", "zero3", 64),
            # Tensors of several MiB: blocks reused from the cache may be larger than their
            # requests; the model states count the requests, rounded, as B22 does.
            (768, 2, "master-bf16", "zero1", 4),
        ]
        for width, layers, precision, mode, n in cases:
            with self.subTest(width=width, layers=layers, precision=precision, mode=mode, n=n):
                shape = ["--width", str(width), "--layers", str(layers), "--heads", "4",
                         "--context", "16"]
                flag = ["--ddp"] if mode == "ddp" else ["--zero", mode[-1]]
                proc = estimate("--device-memory", "1GiB", "--ranks", str(n), "--brief",
                                "--steps", "2", "train_charlm", *shape, *flag, "--precision",
                                precision, "--batch-size", str(2 * n), "--sample-length", "0")
                self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
                expected = subprocess.run(
                    [SHARDING_TOOL, vocab, str(width), str(layers), "4", "16", precision, mode,
                     str(n)], capture_output=True, text=True, timeout=60, check=True).stdout
                lines = [line for line in proc.stdout.splitlines()
                         if line.startswith("model states")]
                # Every rank holds the same model states: one line for all of them.
                self.assertEqual(len(lines), 1, proc.stdout)
                self.assertIn(f"(ranks 0-{n - 1}): ", lines[0])
                numbers = re.findall(r"(parameters|gradients|optimizer state) ([\d,]+)",
                                     lines[0].split(";")[0])
                printed = {k: int(v.replace(",", "")) for k, v in numbers}
                self.assertEqual(printed, {k: int(v) for k, v in re.findall(
                    r"(parameters|gradients|optimizer state) (\d+)", expected)}, proc.stdout)

    def test_bad_input(self):
        for args, text in (
                (["--device-memory", "1GiB", "no_such_program"], "unknown program 'no_such_program'"),
                (["--device-memory", "80XB", "train_mlp"] + ARGS, "cannot read '80XB' as a size"),
                (["--device-memory", "1GiB", "train_mlp", "--device", "cpu"], "--device is"),
                (["--device-memory", "16MiB", "train_mlp", "--max-batch"] + ARGS,
                 "no batch fits on meta:0 of 16MiB"),
                (["train_mlp"], "--device-memory SIZE is required"),
                (["--device-memory", "1GiB", "--ranks", "4", "train_mlp"] + ARGS,
                 "--ranks 4 needs the program's --ddp or --zero STAGE"),
                (["--device-memory", "1GiB", "--ranks", "0", "train_mlp", "--ddp"],
                 "--ranks 0: a whole number in [1, 4096]"),
                (["--device-memory", "1GiB", "--backend", "mpi", "train_mlp"], "--backend mpi"),
                (["--device-memory", "1GiB", "--steps", "2", "b04"], "--steps: b04_"),
                # A program that reads a value on the meta device: the op, in one line.
                (["--device-memory", "1GiB", "b06"],
                 "b06_inplace_ops failed (exit 1): B6: error: [to_vector] a tensor on meta:0 has "
                 "a shape"),
        ):
            proc = estimate(*args)
            self.assertEqual(proc.returncode, 2, proc.stdout)
            self.assertIn(text, proc.stderr)
            self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
            self.assertNotIn("Traceback", proc.stderr)


if __name__ == "__main__":
    unittest.main()
