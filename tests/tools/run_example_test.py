#!/usr/bin/env python3
"""Tests of `./memgrad example all` (tools/run_example.py) with stand-in behaviour programs: a
program that matched (exit 0), one that did not (exit 2) and one this build cannot run (exit 77,
as B22 without Gloo) are counted apart, and only a mismatch fails the run; with --timeout a
program that runs too long is killed, counted as a mismatch, and the others still run.

usage: run_example_test.py
"""
import os
import stat
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNER = os.path.join(ROOT, "tools", "run_example.py")

PROGRAM = """#!/bin/sh
[ "$1" = --describe ] && {{ echo "{id}  a stand-in"; exit 0; }}
echo "{id} ran with: $*"
{body}exit {status}
"""


class ExampleAllTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.folder = os.path.join(self.tmp.name, "examples", "behaviours")
        os.makedirs(self.folder)

    def tearDown(self):
        self.tmp.cleanup()

    def behaviour(self, name, status, body=""):
        path = os.path.join(self.folder, name)
        with open(path, "w") as f:
            f.write(PROGRAM.format(id=name[:3].upper(), status=status, body=body))
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)

    def run_all(self, *args, runner_args=()):
        return subprocess.run([sys.executable, RUNNER, "--build-dir", self.tmp.name, *runner_args,
                               "all", *args], capture_output=True, text=True, timeout=60)

    def test_a_behaviour_past_the_timeout_is_killed_and_the_rest_run(self):
        self.behaviour("b01_first", 0)
        self.behaviour("b02_hangs", 0, body="exec sleep 30\n")
        self.behaviour("b03_third", 0)
        run = self.run_all(runner_args=("--timeout", "1"))
        self.assertEqual(run.returncode, 1)
        self.assertIn("b02_hangs: killed after 1 s", run.stdout)
        self.assertIn("B03 ran with:", run.stdout)
        self.assertIn("2 of 3 behaviour examples matched their expectations; mismatches: "
                      "b02_hangs (timed out)", run.stdout)

    def test_a_skipped_behaviour_is_not_a_mismatch(self):
        self.behaviour("b01_first", 0)
        self.behaviour("b02_second", 0)
        self.behaviour("b22_needs_gloo", 77)
        run = self.run_all("--device", "cuda:0")
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("B01 ran with: --device cuda:0", run.stdout)
        self.assertIn("2 of 2 behaviour examples matched their expectations (1 skipped, this "
                      "build cannot run them: b22_needs_gloo)", run.stdout)
        self.assertNotIn("mismatches", run.stdout)

    def test_a_mismatch_fails_and_is_named(self):
        self.behaviour("b01_first", 0)
        self.behaviour("b08_saved", 2)
        self.behaviour("b09_errors", 1)
        self.behaviour("b22_needs_gloo", 77)
        run = self.run_all()
        self.assertEqual(run.returncode, 1)
        self.assertIn("1 of 3 behaviour examples matched their expectations (1 skipped, this "
                      "build cannot run them: b22_needs_gloo); mismatches: b08_saved, b09_errors",
                      run.stdout)

    def test_every_behaviour_matched(self):
        self.behaviour("b01_first", 0)
        run = self.run_all()
        self.assertEqual(run.returncode, 0)
        self.assertTrue(run.stdout.rstrip().endswith(
            "1 of 1 behaviour examples matched their expectations"), run.stdout)


if __name__ == "__main__":
    unittest.main()
