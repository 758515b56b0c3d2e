#!/usr/bin/env python3
"""Tests of the docs check's comparison (tools/gen_docs.py): what must match exactly, what a
block's tolerance lets through, and how markers state a tolerance."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import gen_docs  # noqa: E402
from gen_docs import Tolerance, differences, parse_spec, stale_reasons  # noqa: E402

NONE = Tolerance()
TEN_PERCENT = Tolerance(rel=0.10)


class ComparisonTest(unittest.TestCase):
    def test_durations_are_masked_in_every_spelling(self):
        old = "epoch 1/1 loss 0.5999 2.1s | done in 2.6 s, step 107.5 ms, 45 ns per request"
        new = "epoch 1/1 loss 0.5999 1.3s | done in 12.0 s, step 5.7 ms, 120 ns per request"
        self.assertEqual(differences(old, new, NONE), [])

    def test_byte_counts_are_exact_under_any_tolerance(self):
        wide = Tolerance(rel=0.5, abs=1e6)
        self.assertNotEqual(differences("kept 1,179,648 B", "kept 1,179,136 B", wide), [])
        self.assertNotEqual(differences("(1.12 MiB)", "(1.13 MiB)", wide), [])
        self.assertNotEqual(differences("(24.00 KiB)", "(24.50 KiB)", wide), [])

    def test_integers_and_text_are_exact(self):
        self.assertNotEqual(differences("26 Linear forwards", "27 Linear forwards", TEN_PERCENT), [])
        self.assertNotEqual(differences("converged: yes", "converged: no", TEN_PERCENT), [])
        self.assertNotEqual(differences("a\nb", "a", TEN_PERCENT), [])

    def test_decimals_are_exact_unless_the_block_states_a_tolerance(self):
        old, new = "float16 0.0630", "float16 0.0653"
        self.assertEqual(len(differences(old, new, NONE)), 1)
        self.assertEqual(differences(old, new, TEN_PERCENT), [])
        # 0.0630 -> 0.0720 moves 12.5%: beyond 10%, and the message names both numbers.
        why = differences(old, "float16 0.0720", TEN_PERCENT)
        self.assertEqual(len(why), 1)
        self.assertIn("0.0630 quoted, 0.0720 now", why[0])

    def test_absolute_tolerance_covers_rounding_noise(self):
        tol = Tolerance(abs=1e-7)
        self.assertEqual(differences("max = 6.52e-09", "max = 5.59e-09", tol), [])
        self.assertNotEqual(differences("max = 6.52e-09", "max = 2.5e-07", tol), [])

    def test_column_widths_may_change(self):
        self.assertEqual(differences("acc  9.5%  x", "acc 10.1%  x", Tolerance(rel=0.1)), [])


class MarkerTest(unittest.TestCase):
    def test_markers_state_relative_and_absolute_tolerances(self):
        self.assertEqual(parse_spec("b05_views --size 1"), ("b05_views --size 1", NONE))
        self.assertEqual(parse_spec("b14 | tolerance: rel 10%"), ("b14", Tolerance(rel=0.1)))
        self.assertEqual(parse_spec("b10 | tolerance: rel 1%, abs 1e-7"),
                         ("b10", Tolerance(rel=0.01, abs=1e-7)))

    def test_bad_tolerances_are_refused(self):
        for spec in ("b14 | tolerance:", "b14 | tolerance: rel 10", "b14 | tolerance: rel -1%",
                     "b14 | tolerance: rel 1%, rel 2%", "b14 | tol: abs 1", "b14 | tolerance: abs x",
                     "b14 | tolerance: abs inf"):
            with self.assertRaises(ValueError, msg=spec):
                parse_spec(spec)

    def test_a_tolerant_block_says_so_under_its_output(self):
        note = gen_docs.tolerance_note(Tolerance(rel=0.1))
        self.assertIn("within 10% (relative)", note)

    def test_variants_do_not_run_again_what_computes_nothing(self):
        self.assertTrue(gen_docs.computes_nothing("estimate train_charlm --device-memory 1GiB"))
        self.assertTrue(gen_docs.computes_nothing("train_mlp --device meta:0 --epochs 1"))
        self.assertFalse(gen_docs.computes_nothing("train_mlp --device sim:0 --epochs 1"))
        # Under MEMGRAD_VARIANT such a block keeps its quoted output without a run (the program
        # named here does not exist, so a run would fail).
        text = ("<!-- output: estimate no_such_program --device-memory 1GiB -->\n```text\nquoted\n"
                "```\n<!-- end output -->")
        old = os.environ.get("MEMGRAD_VARIANT")
        os.environ["MEMGRAD_VARIANT"] = "1"
        try:
            self.assertEqual(gen_docs.regenerate(text, "/nonexistent", {}), text)
            cache = {}
            gen_docs.run_all("/nonexistent", {"docs/x.md": text}, cache)
            self.assertEqual(cache, {})
        finally:
            if old is None:
                del os.environ["MEMGRAD_VARIANT"]
            else:
                os.environ["MEMGRAD_VARIANT"] = old

    def test_a_bad_marker_is_reported_with_its_file_before_anything_runs(self):
        text = ("<!-- output: no_such_program | tolerance: rel 10 -->\n```text\nx\n```\n"
                "<!-- end output -->")
        with self.assertRaisesRegex(ValueError, r"^docs/bad\.md: marker"):
            gen_docs.run_all("/nonexistent", {os.path.join(gen_docs.ROOT, "docs", "bad.md"): text},
                             {})

    def test_text_outside_the_blocks_must_match(self):
        block = "<!-- output: p | tolerance: rel 10% -->\n```text\nloss 0.50\n```\n<!-- end output -->"
        self.assertEqual(stale_reasons("intro\n" + block, "intro\n" + block.replace("0.50", "0.52")), [])
        self.assertNotEqual(stale_reasons("intro\n" + block, "other\n" + block), [])
        self.assertNotEqual(stale_reasons(block, block.replace("0.50", "0.60")), [])


if __name__ == "__main__":
    unittest.main()
