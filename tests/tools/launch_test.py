#!/usr/bin/env python3
"""Tests of `./memgrad launch` (tools/launch.py): the ranks' environment, the rank prefix on every
line, the exit status of the first rank that fails (following failure notes), and a C++ rank that throws in the middle of
collectives (the distributed suite's "throws" worker) stopping the launch fast, with the rank
named; train_mlp's --ddp and --zero on 2 ranks; train_charlm's --ddp and --zero 3 on 2 ranks against
one process.

usage: launch_test.py BUILD_DIR
"""
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_config import built_with_gloo  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, "build")
LAUNCH = os.path.join(ROOT, "tools", "launch.py")
DIST_TESTS = os.path.join(BUILD, "tests", "distributed", "dist_tests")
TRAIN_MLP = os.path.join(BUILD, "examples", "train_mlp")
TRAIN_CHARLM = os.path.join(BUILD, "examples", "train_charlm")
MNIST = "/usr/share/datasets/fashion-mnist"
LICENSES = "/usr/share/common-licenses"  # train_charlm's default text


def launch(args, env=None, timeout=60):
    return subprocess.run([sys.executable, LAUNCH, "--build-dir", BUILD] + args,
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


# The launcher's own behaviour (statuses, names, output): run once, not again under each BLAS
# kernel and thread count of ./memgrad test --variants, since no number a rank computes is compared.
launcher_only = unittest.skipIf(os.environ.get("MEMGRAD_VARIANT"),
                                "compares no computed number (run once, not per variant)")


class LaunchTest(unittest.TestCase):
    def test_every_rank_gets_torchruns_variables_and_a_prefix(self):
        proc = launch(["-n", "3", "--", "sh", "-c",
                       "echo $RANK/$WORLD_SIZE/$LOCAL_RANK/$LOCAL_WORLD_SIZE/$OMP_NUM_THREADS; "
                       "test -d $MEMGRAD_STORE_PATH && echo store"],
                      env={"OMP_NUM_THREADS": ""})
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        for rank in range(3):
            self.assertIn(f"[rank {rank}] {rank}/3/{rank}/3/", proc.stdout)
            self.assertIn(f"[rank {rank}] store", proc.stdout)

    def test_omp_threads_default_to_one_unless_set(self):
        env = dict(os.environ)
        env.pop("OMP_NUM_THREADS", None)
        proc = subprocess.run([sys.executable, LAUNCH, "-n", "2", "sh", "-c",
                               "echo threads=$OMP_NUM_THREADS"],
                              capture_output=True, text=True, timeout=60, env=env)
        self.assertIn("[rank 1] threads=1", proc.stdout)
        proc = launch(["-n", "2", "sh", "-c", "echo threads=$OMP_NUM_THREADS"],
                      env={"OMP_NUM_THREADS": "3"})
        self.assertIn("[rank 0] threads=3", proc.stdout)

    def test_the_first_failing_rank_stops_the_others_and_sets_the_status(self):
        start = time.monotonic()
        proc = launch(["-n", "3", "--grace", "1", "--", "sh", "-c",
                       'if [ "$RANK" = 2 ]; then echo dying >&2; exit 7; fi; sleep 30'])
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(proc.returncode, 7, proc.stdout)
        self.assertIn("[rank 2] dying", proc.stdout)
        self.assertIn("[launch] rank 2 exited with status 7; stopping ranks 0, 1", proc.stdout)

    def test_a_rank_that_found_a_peer_gone_points_the_launcher_to_it(self):
        # Rank 0 ends first, but its failure note (what a ProcessGroup writes on RankFailureError)
        # says rank 1 had exited: the launcher waits for rank 1 and names it, with its status.
        script = ('case "$RANK" in '
                  '0) echo "gone 1" > "$MEMGRAD_ERROR_FILE"; exit 1;; '
                  '1) sleep 0.5; exit 3;; '
                  '*) sleep 30;; esac')
        proc = launch(["-n", "3", "--grace", "5", "--", "sh", "-c", script])
        self.assertEqual(proc.returncode, 3, proc.stdout)
        self.assertIn("[launch] rank 1 exited with status 3 (rank 0 failed after it, finding it "
                      "gone); stopping ranks 2", proc.stdout)
        # A peer named in the note that ends cleanly did not fail: rank 0's failure stands.
        script = script.replace("exit 3", "exit 0")
        proc = launch(["-n", "3", "--grace", "5", "--", "sh", "-c", script])
        self.assertEqual(proc.returncode, 1, proc.stdout)
        self.assertIn("[launch] rank 0 exited with status 1; stopping ranks 2", proc.stdout)

    def test_every_rank_has_its_own_error_file(self):
        proc = launch(["-n", "2", "--", "sh", "-c", 'echo "file=$MEMGRAD_ERROR_FILE"'])
        self.assertEqual(proc.returncode, 0, proc.stdout)
        files = sorted(line.split("file=")[1] for line in proc.stdout.splitlines() if "file=" in line)
        self.assertEqual(len(files), 2, proc.stdout)
        self.assertTrue(files[0].endswith("rank-0.error") and files[1].endswith("rank-1.error"))
        self.assertFalse(os.path.exists(os.path.dirname(files[0])))  # removed at the end

    def test_a_rank_killed_by_a_signal_gives_128_plus_the_signal(self):
        proc = launch(["-n", "2", "--", "sh", "-c", 'if [ "$RANK" = 0 ]; then kill -9 $$; fi'])
        self.assertEqual(proc.returncode, 128 + 9, proc.stdout)
        self.assertIn("[launch] rank 0 was killed by SIGKILL", proc.stdout)

    def test_a_program_that_is_not_there_is_one_line(self):
        proc = launch(["-n", "2", "--", "no-such-program-memgrad"])
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("neither a program nor a built example", proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)

    @unittest.skipUnless(os.path.exists(DIST_TESTS), "the distributed suite is not built")
    def test_a_ranks_lines_reach_the_launcher_as_they_are_printed(self):
        # The rank prints a line through C stdio and is killed before any flush: without line
        # buffering (stdbuf -oL), the line would die in its buffer.
        proc = launch(["-n", "1", "--", DIST_TESTS], env={"MEMGRAD_TEST_WORKER": "prints_then_dies"})
        self.assertIn("[rank 0] rank 0 printed this before it died", proc.stdout)
        self.assertIn("[launch] rank 0 was killed by SIGKILL", proc.stdout)

    @launcher_only
    @unittest.skipUnless(os.path.exists(DIST_TESTS) and built_with_gloo(BUILD),
                         "the distributed suite is not built, or the build has no Gloo")
    def test_a_rank_that_throws_fails_the_launch_fast_naming_it(self):
        for n in (2, 4):
            start = time.monotonic()
            proc = launch(["-n", str(n), "--", DIST_TESTS],
                          env={"MEMGRAD_TEST_WORKER": "throws", "MEMGRAD_DIST_TIMEOUT": "30"})
            elapsed = time.monotonic() - start
            self.assertLess(elapsed, 10, proc.stdout)  # not the 30 s timeout
            self.assertEqual(proc.returncode, 1, proc.stdout)
            self.assertIn("[rank 1] uncaught: rank 1 fails on purpose", proc.stdout)
            self.assertIn("[launch] rank 1 exited with status 1", proc.stdout)
            self.assertNotIn("SIGPIPE", proc.stdout)  # a dead peer is an error, not a signal

    def test_impossible_requests_are_one_line_before_any_rank_starts(self):
        # A store folder that cannot be made: no traceback.
        proc = launch(["-n", "2", "--store", "/proc/memgrad-no-store", "--", "true"])
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("launch: --store /proc/memgrad-no-store: cannot make the folder",
                      proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        # More ranks than the open-file limit lets every rank connect to every other.
        import resource
        limited = subprocess.run(
            [sys.executable, LAUNCH, "-n", "100", "--", "true"], capture_output=True, text=True,
            timeout=30, preexec_fn=lambda: resource.setrlimit(
                resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1])))
        self.assertEqual(limited.returncode, 2, limited.stdout + limited.stderr)
        self.assertIn("-n 100: each rank would keep about 164 files open", limited.stderr)
        self.assertIn("limit of 128 (ulimit -n)", limited.stderr)
        self.assertNotIn("[launch]", limited.stdout)  # refused before any rank started
        # More ranks than the ephemeral ports every pair's listener takes one of (-n 200 ran 40 s
        # before its ranks failed with "bind: Address already in use").
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = map(int, f.read().split())
        n = next(n for n in range(2, 1025) if n * (n - 1) > high - low + 1)
        ports = launch(["-n", str(n), "--", "true"])
        self.assertEqual(ports.returncode, 2, ports.stdout + ports.stderr)
        self.assertIn(f"-n {n}: Gloo's ranks would listen on {n * (n - 1)} ports", ports.stderr)
        self.assertIn(f"net.ipv4.ip_local_port_range {low}-{high}", ports.stderr)
        self.assertNotIn("[launch]", ports.stdout)

    @launcher_only
    @unittest.skipUnless(os.path.exists(DIST_TESTS) and built_with_gloo(BUILD),
                         "the distributed suite is not built, or the build has no Gloo")
    def test_a_stuck_rank_is_named_not_the_one_whose_collective_timed_out(self):
        # Rank 0 stops itself (SIGSTOP) or sleeps after joining; rank 1's barrier times out.
        for worker, state in (("stopped_peer", "stopped by a signal"), ("sleeping_peer", "sleeping")):
            start = time.monotonic()
            proc = launch(["-n", "2", "--grace", "1", "--", DIST_TESTS],
                          env={"MEMGRAD_TEST_WORKER": worker, "MEMGRAD_DIST_TIMEOUT": "2"})
            self.assertLess(time.monotonic() - start, 15, proc.stdout)
            self.assertEqual(proc.returncode, 1, proc.stdout)
            self.assertIn(f"[launch] rank 0 ({state}) never reached the collective that rank 1 "
                          f"waited in: rank 1 exited with status 1 when it timed out", proc.stdout)
        # The rank that timed out can see a stopped peer too, and says so in its own error.
        self.assertNotIn("is stopped", proc.stdout)
        proc = launch(["-n", "2", "--grace", "1", "--", DIST_TESTS],
                      env={"MEMGRAD_TEST_WORKER": "stopped_peer", "MEMGRAD_DIST_TIMEOUT": "2"})
        self.assertRegex(proc.stdout, r"\[rank 1\] uncaught: \[barrier\] collective #1 failed on "
                                      r"rank 1: no rank on this host has exited, but rank 0 "
                                      r"\(pid \d+\) is stopped")

    @launcher_only
    @unittest.skipUnless(os.path.exists(TRAIN_MLP) and built_with_gloo(BUILD) and os.path.isdir(MNIST),
                         f"train_mlp is not built, the build has no Gloo, or {MNIST} is missing")
    def test_rank_0s_progress_line_arrives_while_it_trains(self):
        # launch's output is a pipe here, as the ranks' is: the bar's redraws come through as
        # lines (at most one a second), each well before the epoch ends.
        import re
        proc = subprocess.Popen([sys.executable, LAUNCH, "--build-dir", BUILD, "-n", "2", "--",
                                 TRAIN_MLP, "--ddp", "--epochs", "1", "--max-steps", "150"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        arrivals = []
        for line in proc.stdout:
            arrivals.append((time.monotonic(), line))
        self.assertEqual(proc.wait(timeout=120), 0, "".join(line for _, line in arrivals))
        progress = [(t, int(m.group(1))) for t, line in arrivals
                    if (m := re.match(r"\[rank 0\] epoch 1/1 \[[#-]+\] (\d+)/468 loss", line))
                    and "test acc" not in line]
        end = next(t for t, line in arrivals if "final test accuracy" in line)
        text = "".join(line for _, line in arrivals)
        self.assertGreaterEqual(len(progress), 2, text)  # the first redraw, and one a second after
        self.assertLess(progress[0][1], 150, text)
        self.assertGreater(end - progress[0][0], 0.5, text)  # shown while rank 0 trained on
        self.assertEqual([n for _, n in progress], sorted(n for _, n in progress), text)
        self.assertNotIn("\r", text)

    @launcher_only
    @unittest.skipUnless(os.path.exists(TRAIN_MLP) and built_with_gloo(BUILD) and os.path.isdir(MNIST),
                         f"train_mlp is not built, the build has no Gloo, or {MNIST} is missing")
    def test_on_a_terminal_the_progress_line_is_redrawn_in_place(self):
        import pty
        main, terminal = pty.openpty()
        proc = subprocess.Popen([sys.executable, LAUNCH, "--build-dir", BUILD, "-n", "2", "--",
                                 TRAIN_MLP, "--ddp", "--epochs", "1", "--max-steps", "20"],
                                stdout=terminal, stderr=terminal, stdin=subprocess.DEVNULL)
        os.close(terminal)
        out = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: every writer of the terminal has exited
                break
            if not chunk:
                break
            out += chunk
        os.close(main)
        self.assertEqual(proc.wait(timeout=120), 0, out)
        text = out.decode("utf-8", "replace")
        redraws = text.count("\r[rank 0] epoch 1/1 [")
        self.assertGreaterEqual(redraws, 2, text)  # 1/468, then each percent
        # The redraws share one line: the next line starts after the finished bar.
        self.assertRegex(text, r"\r\[rank 0\] epoch 1/1 \[[#-]+\] 20/468 [^\r\n]*test acc")

    @unittest.skipUnless(os.path.exists(TRAIN_MLP) and built_with_gloo(BUILD) and os.path.isdir(MNIST),
                         f"train_mlp is not built, the build has no Gloo, or {MNIST} is missing")
    def test_train_mlp_ddp_and_zero_train_alike_on_two_ranks(self):
        # The same global batches, so DDP and every ZeRO stage reach the same test accuracy
        # (to the printed digits); each rank's first-step report must match, or it exits with 2.
        accuracies = {}
        for mode in (["--ddp"], ["--zero", "1"], ["--zero", "2"], ["--zero", "3"],
                     ["--zero", "3", "--zero-overlap"]):
            proc = launch(["-n", "2", "--", TRAIN_MLP] + mode +
                          ["--epochs", "1", "--max-steps", "8"], timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            self.assertNotIn("[rank 1] epoch", proc.stdout)  # rank 0 alone prints progress
            final = [line for line in proc.stdout.splitlines() if "final test accuracy" in line]
            self.assertEqual(len(final), 1, proc.stdout)
            accuracies[mode[-1]] = final[0].split()[5]
        self.assertEqual(len(set(accuracies.values())), 1, accuracies)

    @unittest.skipUnless(os.path.exists(TRAIN_CHARLM) and built_with_gloo(BUILD) and
                         os.path.isdir(LICENSES),
                         f"train_charlm is not built, the build has no Gloo, or {LICENSES} is "
                         "missing")
    def test_train_charlm_ddp_and_zero3_train_as_one_process_on_two_ranks(self):
        # A small model for 4 steps (well under a second per run). The ranks split each global
        # batch of 8 windows, so the losses are one process's but for the order in which the
        # ranks' gradients are added (about 1e-7 relative): equal to within 1.5 units of the
        # last printed digit (the running training loss has 4 decimals, validation 3).
        args = ["--steps", "4", "--layers", "1", "--width", "64", "--heads", "4", "--context",
                "32", "--batch-size", "8", "--sample-length", "16"]

        def losses(stdout, prefix):
            train = [line for line in stdout.splitlines()
                     if line.startswith(prefix + "training [") and " 4/4 loss " in line]
            val = [line for line in stdout.splitlines()
                   if line.startswith(prefix + "validation loss ")]
            self.assertEqual((len(train), len(val)), (1, 1), stdout)
            return (float(train[0].split(" loss ")[1].split()[0]),
                    float(val[0][len(prefix + "validation loss "):].split()[0]))

        single = subprocess.run([TRAIN_CHARLM] + args, capture_output=True, text=True,
                                timeout=60)
        self.assertEqual(single.returncode, 0, single.stdout + single.stderr)
        reference = losses(single.stdout, "")
        for mode in (["--ddp"], ["--zero", "3"]):
            with self.subTest(mode=mode):
                proc = launch(["-n", "2", "--", TRAIN_CHARLM] + mode + args, timeout=60)
                self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
                self.assertNotIn("[rank 1] validation", proc.stdout)  # rank 0 alone reports
                train, val = losses(proc.stdout, "[rank 0] ")
                self.assertLessEqual(abs(train - reference[0]), 1.5e-4,
                                     f"{mode}: training loss {train}, one process {reference[0]}")
                self.assertLessEqual(abs(val - reference[1]), 1.5e-3,
                                     f"{mode}: validation loss {val}, one process {reference[1]}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
