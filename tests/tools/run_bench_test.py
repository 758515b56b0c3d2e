#!/usr/bin/env python3
"""Tests of the benchmark runner's comparison logic (tools/run_bench.py), of the targets each
`./memgrad bench` command builds (tools/build_targets.py) and of the PyTorch 2.x peer fetcher's
extraction (tools/torch_peer.py), with stand-in programs that print fixed figures: no timing is
measured here (timings live in `./memgrad bench`).

usage: run_bench_test.py
"""
import io
import os
import stat
import struct
import subprocess
import sys
import tempfile
import unittest
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "tools")
sys.path.insert(0, TOOLS)
sys.path.insert(0, os.path.join(ROOT, "bench", "peer"))
import build_targets  # noqa: E402
import run_bench  # noqa: E402
import same_start  # noqa: E402  (bench/peer/same_start.py)
import torch_peer  # noqa: E402

# A stand-in benchmark program: its config lines, then its figures (value per side).
PROGRAM = """#!/bin/sh
[ "$1" = --config ] && {{ echo "config: {label}, 2 threads"; exit 0; }}
echo "config: {label}, 2 threads"
echo "config: BLAS {blas}"
echo "$0" >> "{log}"
echo "add_1elem_overhead: {overhead} ns/op"
echo "sgemm_1024x1024x1024: {gemm} GFLOP/s"
echo "train_final_loss: {loss} nats"
echo "train_same_start_loss_last: {same} nats"
"""


def float32(values):
    """Each double rounded to float32, as torch.tensor(..., dtype=torch.float32) rounds it."""
    return [struct.unpack("f", struct.pack("f", v))[0] for v in values]


class SameStartMirrorTest(unittest.TestCase):
    """The Python peer's copy of bench/same_start.h gives the header's values to the bit (the
    same constants are asserted of the header in tests/nn/same_start_test.cpp)."""

    def test_values_match_the_header(self):
        self.assertEqual(float32(same_start.uniform_values(7, 3, -0.25, 0.25)),
                         [float.fromhex(h) for h in ("-0x1.c341e2p-5", "-0x1.eecf0cp-3",
                                                     "0x1.9a6102p-3")])
        self.assertEqual(float32(same_start.normal_values(3, 3)),
                         [float.fromhex(h) for h in ("-0x1.34d106p-3", "-0x1.de3804p-2",
                                                     "0x1.3c685p+0")])
        self.assertEqual(same_start.integer_values(5, 6, 10), [8, 4, 3, 9, 1, 6])
        self.assertEqual(float32(same_start.parameter_values(2, "fc2.weight", [512, 512])[:3]),
                         [float.fromhex(h) for h in ("0x1.159ec4p-8", "-0x1.af38aep-6",
                                                     "-0x1.22c4dcp-8")])
        self.assertEqual(float32(same_start.parameter_values(3, "ln.weight", [128])[:1]),
                         [float.fromhex("0x1.08dc5ep+0")])
        self.assertEqual(same_start.linear_stack_shapes([784, 512, 10]),
                         [[512, 784], [512], [10, 512], [10]])
        with self.assertRaisesRegex(ValueError, "high must be positive, not 0"):
            same_start.integer_values(5, 1, 0)


class RunnerTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.build = os.path.join(self.tmp.name, "build")
        self.log = os.path.join(self.tmp.name, "order.log")
        os.makedirs(os.path.join(self.build, "bench"))
        self.bench = run_bench.Benchmark(
            "ops", "bench/ops_bench", "stand-in", peer="bench/ops_peer",
            targets=(run_bench.Target("add_1elem_overhead", "<=", 0.5),
                     run_bench.Target("sgemm_1024x1024x1024", ">=", 0.95)))

    def tearDown(self):
        self.tmp.cleanup()

    def program(self, name, overhead, gemm, loss, blas="OpenBLAS x, core Haswell, openmp",
                same=0.8323516):
        path = os.path.join(self.build, "bench", name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(PROGRAM.format(label=name, blas=blas, log=self.log, overhead=overhead,
                                   gemm=gemm, loss=loss, same=same))
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)

    def run_compared(self, *argv):
        args = run_bench.parse_args(["--repeats", "3", *argv])
        out = io.StringIO()
        err = io.StringIO()
        stdout, stderr = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            status = run_bench.run_compared(self.bench, self.build, args)
        finally:
            sys.stdout, sys.stderr = stdout, stderr
        return status, out.getvalue(), err.getvalue()

    def runs(self):
        with open(self.log, encoding="utf-8") as f:
            return [os.path.basename(line.strip()) for line in f]

    def test_ratios_and_targets_against_both_peers(self):
        self.program("ops_bench", 100, 200, 0.3)
        self.program("ops_peer", 400, 190, 0.1)
        self.program("ops_peer_torch2", 250, 210, 0.2, blas="MKL 2024")
        status, out, _ = self.run_compared()
        label2 = run_bench.PEERS[1].label
        self.assertIn("add_1elem_overhead ratio memgrad/libtorch-1.13: 0.25", out)
        self.assertIn(f"add_1elem_overhead ratio memgrad/{label2}: 0.4", out)
        self.assertIn("target add_1elem_overhead ratio memgrad/libtorch-1.13 <= 0.5: PASS", out)
        self.assertIn(f"target add_1elem_overhead ratio memgrad/{label2} <= 0.5: PASS", out)
        # 200 / 210 = 0.952: passes 0.95; 200 / 190 against 1.13.
        self.assertIn(f"target sgemm_1024x1024x1024 ratio memgrad/{label2} >= 0.95: PASS", out)
        self.assertEqual(status, 0)
        # The loss is printed for each side, never as a ratio.
        self.assertIn("train_final_loss memgrad: 0.3 nats", out)
        self.assertNotIn("train_final_loss ratio", out)
        # Three rounds, each side first in turn.
        self.assertEqual(self.runs(), ["ops_bench", "ops_peer", "ops_peer_torch2",
                                       "ops_peer", "ops_peer_torch2", "ops_bench",
                                       "ops_peer_torch2", "ops_bench", "ops_peer"])

    def test_a_target_missed_against_one_peer_fails(self):
        self.program("ops_bench", 100, 200, 0.3)
        self.program("ops_peer", 400, 190, 0.1)
        self.program("ops_peer_torch2", 150, 300, 0.2, blas="MKL 2024")
        status, out, _ = self.run_compared()
        label2 = run_bench.PEERS[1].label
        self.assertIn(f"target add_1elem_overhead ratio memgrad/{label2} <= 0.5: FAIL (0.667)",
                      out)
        self.assertIn(f"target sgemm_1024x1024x1024 ratio memgrad/{label2} >= 0.95: FAIL", out)
        self.assertEqual(status, 1)

    def test_same_start_losses_agree_within_the_tolerance(self):
        self.bench = self.bench._replace(targets=(
            run_bench.Target("train_same_start_loss_last", "~=", run_bench.SAME_START_TOLERANCE),
            # memgrad's figure against another of its own (ZeRO-3's against DDP's in dist).
            run_bench.Target("train_same_start_loss_last", "~=", run_bench.SAME_START_TOLERANCE,
                             relative_to="train_final_loss")))
        self.program("ops_bench", 100, 200, 0.3, same=0.8323516)
        self.program("ops_peer", 400, 190, 0.1, same=0.8323517)
        # 4.3e-6 apart, as GELU's exact form against its tanh form moved charlm's last loss.
        self.program("ops_peer_torch2", 250, 210, 0.2, blas="MKL 2024", same=0.83235516)
        status, out, _ = self.run_compared()
        label2 = run_bench.PEERS[1].label
        # Nine digits, for the figures and the ratio.
        self.assertIn("train_same_start_loss_last memgrad: 0.8323516 nats", out)
        self.assertIn("train_same_start_loss_last ratio memgrad/libtorch-1.13: 0.99999988", out)
        self.assertIn("target train_same_start_loss_last ratio memgrad/libtorch-1.13 ~= "
                      "1 +- 1e-06: PASS (0.99999988)", out)
        self.assertIn(f"target train_same_start_loss_last ratio memgrad/{label2} ~= "
                      "1 +- 1e-06: FAIL (0.999995723)", out)
        self.assertIn("target memgrad train_same_start_loss_last ~= (1 +- 1e-06) x memgrad "
                      "train_final_loss: FAIL (2.77450533)", out)
        self.assertEqual(status, 1)

    def test_a_missing_peer_fails_and_says_how_to_get_it(self):
        self.program("ops_bench", 100, 200, 0.3)
        self.program("ops_peer", 400, 190, 0.1)
        status, _, err = self.run_compared()
        self.assertEqual(status, 1)
        self.assertIn(f"peer {run_bench.PEERS[1].label} missing", err)
        self.assertIn("tools/torch_peer.py", err)
        self.assertFalse(os.path.exists(self.log), "nothing runs when a peer is missing")

    def test_peer_selects_one(self):
        self.program("ops_bench", 100, 200, 0.3)
        self.program("ops_peer", 400, 190, 0.1)
        status, out, _ = self.run_compared("--peer", "1.13")
        self.assertEqual(status, 0)
        self.assertNotIn(run_bench.PEERS[1].label, out)
        self.assertEqual(sorted(set(self.runs())), ["ops_bench", "ops_peer"])


class BuildTargetsTest(unittest.TestCase):
    def targets(self, *args):
        # An unconfigured folder defines nothing; executables() is replaced by every program.
        defined = {"bench/ops_bench", "bench/ops_peer", "bench/ops_peer_torch2"}
        original = build_targets.executables
        build_targets.executables = lambda _: defined
        try:
            return build_targets.bench_targets("build", list(args))
        finally:
            build_targets.executables = original

    def test_each_peer_selection_builds_its_programs(self):
        self.assertEqual(self.targets("ops"),
                         ["bench/ops_bench", "bench/ops_peer", "bench/ops_peer_torch2"])
        self.assertEqual(self.targets("--peer", "2", "ops"),
                         ["bench/ops_bench", "bench/ops_peer_torch2"])
        self.assertEqual(self.targets("--no-peer", "ops"), ["bench/ops_bench"])


class TorchPeerTest(unittest.TestCase):
    def test_extract_keeps_only_what_the_peers_use(self):
        with tempfile.TemporaryDirectory() as tmp:
            wheel = os.path.join(tmp, "torch-0-py3-none-any.whl")
            with zipfile.ZipFile(wheel, "w") as z:
                z.writestr("torch/include/torch/csrc/api/include/torch/torch.h", "// header")
                z.writestr("torch/lib/libc10.so", b"\x7fELF c10")
                z.writestr("torch/lib/libtorch_cuda.so", b"\x7fELF cuda")
                z.writestr("torch/__init__.py", "")
            dest = os.path.join(tmp, "libtorch2")
            self.assertEqual(torch_peer.extract(wheel, torch_peer.TORCH_MEMBERS, dest), 2)
            with open(os.path.join(dest, "lib", "libc10.so"), "rb") as f:
                self.assertEqual(f.read(), b"\x7fELF c10")
            self.assertTrue(os.path.exists(
                os.path.join(dest, "include/torch/csrc/api/include/torch/torch.h")))
            self.assertFalse(os.path.exists(os.path.join(dest, "lib", "libtorch_cuda.so")))
            # Not every needed file, no VERSION: not fetched, so `fetch` fetches again.
            self.assertFalse(torch_peer.is_fetched(dest))
            for path in torch_peer.NEEDED:
                os.makedirs(os.path.dirname(os.path.join(dest, path)), exist_ok=True)
                open(os.path.join(dest, path), "a", encoding="utf-8").close()
            self.assertFalse(torch_peer.is_fetched(dest))
            with open(os.path.join(dest, "VERSION"), "w", encoding="utf-8") as f:
                f.write("2.0.0\n")
            self.assertFalse(torch_peer.is_fetched(dest), "another release is fetched again")
            with open(os.path.join(dest, "VERSION"), "w", encoding="utf-8") as f:
                f.write(torch_peer.TORCH + "\n")
            self.assertTrue(torch_peer.is_fetched(dest))
            out = subprocess.run([sys.executable, os.path.join(TOOLS, "torch_peer.py"), "path",
                                  "--dest", dest], capture_output=True, text=True, check=False)
            self.assertEqual((out.returncode, out.stdout.strip()), (0, dest))


if __name__ == "__main__":
    unittest.main()
