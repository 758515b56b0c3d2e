#!/usr/bin/env python3
"""--precision in both training programs: every mixed-precision mode trains like float32, alone
and with ZeRO stages 1-3 on 2 and 4 ranks.

  * train_charlm (a small transformer, 60 steps) and train_mlp (Fashion-MNIST, 40 steps) in
    amp-fp16, amp-bf16, master-fp16 and master-bf16 reach float32's training loss within
    CONVERGENCE (the first-step memory report matching, exit status 0);
  * with master weights, ZeRO-1/2/3 on 2 and 4 ranks (gloo, one host) give one process's losses
    within RANKS: the ranks split each global batch, so only the order in which 16-bit gradients
    are summed differs. Every stage and rank count runs in float16 on train_charlm and in
    bfloat16 on train_mlp; the other precision runs ZeRO-3 on 4 ranks on each (ZEROS).

usage: precision_test.py BUILD_DIR
"""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_config import built_with_gloo  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, "build")
LAUNCH = os.path.join(ROOT, "tools", "launch.py")
TRAIN_MLP = os.path.join(BUILD, "examples", "train_mlp")
TRAIN_CHARLM = os.path.join(BUILD, "examples", "train_charlm")
MNIST = "/usr/share/datasets/fashion-mnist"
LICENSES = "/usr/share/common-licenses"

MODES = ("amp-fp16", "amp-bf16", "master-fp16", "master-bf16")
# |loss - float32's loss| after the run: the 16-bit roundings move the running training loss
# by a few 1e-4 on these runs (measured: at most 5e-4); 0.01 is still far below what a broken
# update would give (the loss falls by more than 1 over these steps).
CONVERGENCE = 0.01
# Across rank counts and stages, against one process in the same precision: measured at most
# 2e-4 (training) and 1e-3 (validation, 3 printed decimals).
RANKS = {"train": 5e-4, "validation": 2e-3}

# (precision, ranks, stage) of each program's ZeRO runs.
def zeros(full, other):
    return ([(full, n, stage) for n in (2, 4) for stage in ("1", "2", "3")] +
            [(other, 4, "3")])


ZEROS = {"train_charlm": zeros("master-fp16", "master-bf16"),
         "train_mlp": zeros("master-bf16", "master-fp16")}

CHARLM_ARGS = ["--layers", "1", "--width", "64", "--heads", "4", "--context", "32",
               "--batch-size", "8", "--sample-length", "16"]
MLP_ARGS = ["--epochs", "1", "--batch-size", "128"]


def run(command, ranks=1, timeout=120):
    if ranks > 1:
        command = [sys.executable, LAUNCH, "--build-dir", BUILD, "-n", str(ranks), "--"] + command
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout.replace("\r", "\n") + proc.stderr


def charlm_losses(output, steps):
    """(running training loss, validation loss) from train_charlm's rank-0 output."""
    lines = [line.removeprefix("[rank 0] ") for line in output.splitlines()]
    train = [line for line in lines if line.startswith("training [") and f" {steps}/{steps} loss "
             in line]
    val = [line for line in lines if line.startswith("validation loss ")]
    if not train or not val:
        raise AssertionError(f"no final losses in:\n{output}")
    return (float(train[-1].split(" loss ")[1].split()[0]),
            float(val[-1][len("validation loss "):].split()[0]))


def mlp_loss(output, steps):
    """The epoch's running training loss at its last step, from train_mlp's rank-0 output."""
    lines = [line.removeprefix("[rank 0] ") for line in output.splitlines()]
    done = [line for line in lines if line.startswith("epoch 1/1 [") and f" {steps}/" in line]
    if not done:
        raise AssertionError(f"no step {steps} in:\n{output}")
    return float(done[-1].split(" loss ")[1].split()[0])


class PrecisionCase:
    """The tests of one program; a subclass names it, its arguments and how to read its losses
    (a tuple: the running training loss, and train_charlm's validation loss)."""
    NAME, PROGRAM, ARGS, STEP_FLAG = "", "", [], ""
    CONVERGENCE_STEPS, ZERO_STEPS = 0, 0

    def losses(self, output, steps):
        raise NotImplementedError

    def run_losses(self, precision, steps, extra=(), ranks=1):
        status, out = run([self.PROGRAM, self.STEP_FLAG, str(steps), "--precision", precision,
                           *extra] + self.ARGS, ranks)
        self.assertEqual(status, 0, out)  # 2: a row of the first-step report did not match
        return self.losses(out, steps)

    def test_every_precision_trains_like_float32(self):
        fp32 = self.run_losses("fp32", self.CONVERGENCE_STEPS)
        for precision in MODES:
            with self.subTest(precision=precision):
                got = self.run_losses(precision, self.CONVERGENCE_STEPS)
                for value, reference in zip(got, fp32):
                    self.assertLessEqual(abs(value - reference), CONVERGENCE,
                                         (precision, got, fp32))

    def test_master_weights_with_zero_on_2_and_4_ranks_train_as_one_process(self):
        if not built_with_gloo(BUILD):
            self.skipTest("the build has no Gloo")
        steps = self.ZERO_STEPS
        alone = {p: self.run_losses(p, steps) for p in ("master-fp16", "master-bf16")}
        for precision, ranks, stage in ZEROS[self.NAME]:
            with self.subTest(precision=precision, ranks=ranks, stage=stage):
                got = self.run_losses(precision, steps, ["--zero", stage], ranks)
                for value, reference, tolerance in zip(got, alone[precision],
                                                       (RANKS["train"], RANKS["validation"])):
                    self.assertLessEqual(abs(value - reference), tolerance,
                                         (got, alone[precision]))


@unittest.skipUnless(os.path.exists(TRAIN_CHARLM) and os.path.isdir(LICENSES),
                     f"train_charlm is not built or {LICENSES} is missing")
class CharLMPrecision(PrecisionCase, unittest.TestCase):
    NAME, PROGRAM, ARGS, STEP_FLAG = "train_charlm", TRAIN_CHARLM, CHARLM_ARGS, "--steps"
    CONVERGENCE_STEPS, ZERO_STEPS = 60, 12

    def losses(self, output, steps):
        return charlm_losses(output, steps)


@unittest.skipUnless(os.path.exists(TRAIN_MLP) and os.path.isdir(MNIST),
                     f"train_mlp is not built or {MNIST} is missing")
class MlpPrecision(PrecisionCase, unittest.TestCase):
    NAME, PROGRAM, ARGS, STEP_FLAG = "train_mlp", TRAIN_MLP, MLP_ARGS, "--max-steps"
    CONVERGENCE_STEPS, ZERO_STEPS = 40, 6

    def losses(self, output, steps):
        return (mlp_loss(output, steps),)

    def test_amp_and_precision_cannot_disagree(self):
        status, out = run([TRAIN_MLP, "--amp", "--precision", "master-bf16", "--max-steps", "1"])
        self.assertEqual(status, 1, out)
        self.assertIn("--amp is --precision amp-fp16", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
