#!/usr/bin/env python3
"""Where the bytes at a peak are (tools/memory_categories.py): the table of modules x categories
sums to the trace's peak exactly, and each category holds the bytes the configuration says it
must: parameters 4 B per weight, Adam's state twice that, SGD's momentum once, DDP's buckets one
gradient per weight, ZeRO-3's shards a quarter of each unit on 4 ranks, a test batch its pixels
and labels, checkpointing fewer saved activations. `lab categories` and `estimate` print the same
table for the same run; the stacked SVG is well-formed with one layer per category present; a file
that is not a trace is one line and exit 2.

usage: memory_categories_test.py BUILD_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, "build")
sys.path.insert(0, os.path.join(ROOT, "tools"))
import memory_categories as mc  # noqa: E402

# train_mlp: 784 -> 512 -> 512 -> 10, float32.
LAYERS = {"fc1": 784 * 512 + 512, "fc2": 512 * 512 + 512, "fc3": 512 * 10 + 10}
WEIGHTS = sum(LAYERS.values())
MLP = ["--epochs", "1", "--max-steps", "2", "--batch-size", "256"]


def trace_of(program, args, device="sim:0", env=None):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "t.json")
        proc = subprocess.run([os.path.join(BUILD, "examples", program), "--device", device,
                               "--memory-limit", "1GiB"] + args, capture_output=True, text=True,
                              timeout=300, cwd=ROOT,
                              env=dict(os.environ, MEMGRAD_TRACE=path, **(env or {})))
        assert proc.returncode == 0, proc.stderr[-2000:]
        with open(os.path.join(folder, f"t.{device.replace(':', '')}.json"), encoding="utf-8") as f:
            return json.load(f)


def census_at_peak(trace):
    blocks = mc.blocks_of(trace)
    at = mc.peak_event(trace)
    table, free = mc.census(trace, blocks, at)
    totals = {c: sum(row[c] for row in table.values()) for c in mc.CATEGORIES + (mc.ROUNDING,)}
    return table, totals, free, trace["memgrad_events"][at]


class CategoriesTest(unittest.TestCase):
    def check_sums(self, trace):
        table, totals, free, event = census_at_peak(trace)
        self.assertEqual(sum(totals.values()), event["allocated"])
        self.assertEqual(sum(totals.values()) + free, event["reserved"])
        self.assertEqual(event["allocated"], max(e["allocated"] for e in trace["memgrad_events"]))
        return table, totals

    def test_adam_state_is_twice_the_parameters(self):
        table, totals = self.check_sums(trace_of("train_mlp", MLP))
        self.assertEqual(totals["parameters"], 4 * WEIGHTS)
        self.assertEqual(totals["optimizer state"], 2 * 4 * WEIGHTS)
        for name, weights in LAYERS.items():
            self.assertEqual(table[name]["parameters"], 4 * weights, name)
            self.assertEqual(table[name]["optimizer state"], 8 * weights, name)
        # The peak is in evaluation: a test batch of 1000 images and their labels.
        self.assertEqual(totals["inputs"], 1000 * 784 * 4 + 1000 * 8)

    def test_sgd_momentum_is_once_the_parameters(self):
        _, totals = self.check_sums(trace_of("train_mlp", MLP + ["--optimizer", "sgd"]))
        self.assertEqual(totals["optimizer state"], 4 * WEIGHTS)

    def test_ddp_buckets_hold_one_gradient_per_weight(self):
        env = {"RANK": "0", "WORLD_SIZE": "2"}
        trace = trace_of("train_mlp", MLP + ["--ddp", "--backend", "gloo"], "meta:0", env)
        table, totals = self.check_sums(trace)
        self.assertEqual(table["(gradient buckets)"]["gradients"], 4 * WEIGHTS)
        self.assertEqual(totals["parameters"], 4 * WEIGHTS)

    def test_zero_3_keeps_a_quarter_of_each_unit_on_4_ranks(self):
        env = {"RANK": "1", "WORLD_SIZE": "4"}
        trace = trace_of("train_mlp", MLP + ["--zero", "3"], "meta:0", env)
        # After the first optimizer step the gathered units are gone: only the shards are left.
        events, contexts = trace["memgrad_events"], trace["contexts"]
        step = max(i for i, e in enumerate(events) if contexts[e["ctx"]]["phase"] == "optimizer")
        table, _ = mc.census(trace, mc.blocks_of(trace), step)
        for name, weights in LAYERS.items():
            padded = -(-weights // 4) * 4
            self.assertEqual(table[name]["parameters"], padded, name)  # 4 B x padded / 4

    def test_checkpointing_saves_fewer_activations(self):
        args = ["--steps", "1", "--sample-length", "0", "--layers", "4"]
        plain = trace_of("train_charlm", args)
        checkpointed = trace_of("train_charlm", args + ["--checkpoint-segments", "4"])
        self.check_sums(plain)
        self.check_sums(checkpointed)
        saved = {}
        for name, trace in (("plain", plain), ("checkpointed", checkpointed)):
            # Just before the first backward: what the forward keeps for it.
            backward = next(i for i, e in enumerate(trace["memgrad_events"])
                            if trace["contexts"][e["ctx"]]["phase"] == "backward")
            table, _ = mc.census(trace, mc.blocks_of(trace), backward - 1)
            saved[name] = sum(row["saved activations"] for row in table.values())
        self.assertLess(saved["checkpointed"], saved["plain"] / 2)

    def test_lab_categories_and_estimate_print_the_same_table(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "t.json")
            subprocess.run([os.path.join(BUILD, "examples", "train_mlp"), "--device", "sim:0",
                            "--memory-limit", "512MiB"] + MLP, capture_output=True, timeout=300,
                           cwd=ROOT, env=dict(os.environ, MEMGRAD_TRACE=path), check=True)
            svg = os.path.join(folder, "t.svg")
            lab = subprocess.run([sys.executable, os.path.join(ROOT, "lab", "cli", "lab.py"),
                                  "--build-dir", BUILD, "categories",
                                  os.path.join(folder, "t.sim0.json"), "--svg", svg],
                                 capture_output=True, text=True, timeout=300, cwd=ROOT)
            self.assertEqual(lab.returncode, 0, lab.stderr)
            root = ElementTree.parse(svg).getroot()
        estimate = subprocess.run(
            [sys.executable, os.path.join(ROOT, "tools", "estimate.py"), "--build-dir", BUILD,
             "--device-memory", "512MiB", "train_mlp"] + MLP,
            capture_output=True, text=True, timeout=300, cwd=ROOT)
        self.assertEqual(estimate.returncode, 0, estimate.stderr)
        table = lab.stdout[:lab.stdout.index("timeline:")]
        self.assertIn(table, estimate.stdout)
        layers = {t.text for p in root.iter("{http://www.w3.org/2000/svg}polygon")
                  for t in p.iter("{http://www.w3.org/2000/svg}title")}
        self.assertEqual(layers, {"parameters", "optimizer state", "inputs", "temporaries",
                                  "gradients", "saved activations", "rounding",
                                  "reserved, not allocated"})

    def test_not_a_trace(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            f.write('{"memgrad_events": [')
            f.flush()
            proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools",
                                                                "memory_categories.py"), f.name],
                                  capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("is not a memgrad trace", proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1)


if __name__ == "__main__":
    unittest.main()
