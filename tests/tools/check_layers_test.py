#!/usr/bin/env python3
"""Tests of the layering check (tools/check_layers.py): a tree planted in a temporary folder with
one include of each kind must pass or fail exactly where the rooms' order says, naming the file,
the line and the header: one case per rule. (The repository itself is checked by the `layers`
test.)"""
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import check_layers  # noqa: E402


def plant(root, files):
    """Writes {relative path: text} under `root`."""
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


# A tree whose every include is allowed: down, within a room, into a subfolder, local, system,
# and anything from a program folder (lab/cli inside the lab room).
CLEAN = {
    "base/error.h": "#pragma once\n#include <string>\n",
    "allocator/error.h": '#pragma once\n#include "base/error.h"\n',
    "allocator/block_pool.h": '#pragma once\n#include "allocator/error.h"\n'
                              '#include "block_pool_inl.h"\n',
    "allocator/block_pool_inl.h": "#pragma once\n",
    "kernels/cuda/gemm.cu": '#include "allocator/error.h"\n#include "kernels/cuda/gemm.h"\n',
    "kernels/cuda/gemm.h": "#pragma once\n",
    "engine/tensor.h": '#pragma once\n#include "kernels/cuda/gemm.h"\n'
                       '#include "engine/nn/linear.h"\n',
    "engine/nn/linear.cpp": '#include "engine/tensor.h"\n#include "memgrad_build_config.h"\n',
    "engine/nn/linear.h": "#pragma once\n",
    "autograd/backward.cpp": '#include "engine/tensor.h"\n#include "allocator/error.h"\n',
    "interop/pickle_reader.cpp": '#include "allocator/error.h"\n#include "base/error.h"\n',
    "lab/trace_replay.cpp": '#include "interop/pickle_reader.h"\n#include "allocator/error.h"\n',
    "lab/cli/lab_replay.cpp": '#include "engine/tensor.h"\n#include "examples/common/report.h"\n',
    "distributed/process_group.cpp": '#include "autograd/backward.h"\n#include "lab/trace_replay.h"\n',
}


def run_check(root):
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(out):
        status = check_layers.main(["check_layers.py", root])
    return status, out.getvalue()


class CheckLayersTest(unittest.TestCase):
    def test_a_tree_that_includes_only_downwards_passes(self):
        with tempfile.TemporaryDirectory() as d:
            plant(d, CLEAN)
            status, out = run_check(d)
            self.assertEqual(status, 0, out)
            self.assertIn("13 files", out)  # lab/cli is a program folder, not checked

    def test_each_rule_is_enforced(self):
        # (room, the header a file of it includes) for every room below another one, and what
        # the check must say.
        rules = {
            ("base", "allocator/error.h"): "base may not use allocator",
            ("allocator", "interop/py_value.h"): "allocator may not use interop",
            ("allocator", "lab/policy_registry.h"): "allocator may not use lab",
            ("interop", "lab/trace_replay.h"): "interop may not use lab",
            ("kernels", "lab/policy_registry.h"): "kernels may not use lab",
            ("kernels", "interop/py_value.h"): "kernels may not use interop",
            ("lab", "kernels/backend.h"): "lab may not use kernels",
            ("engine", "autograd/node.h"): "engine may not use autograd",
            ("engine", "distributed/process_group.h"): "engine may not use distributed",
            ("autograd", "distributed/process_group.h"): "autograd may not use distributed",
            ("distributed", "examples/common/report.h"): "distributed may not use examples",
            ("lab", "lab/cli/lab_layout.h"): "lab may not use lab/cli",
        }
        for (room, header), says in rules.items():
            with self.subTest(room=room, header=header), tempfile.TemporaryDirectory() as d:
                plant(d, dict(CLEAN, **{f"{room}/planted.cpp": f'#include "{header}"\n'}))
                status, out = run_check(d)
                self.assertEqual(status, 1, out)
                self.assertIn(f'{room}/planted.cpp:1: includes "{header}" ({says})', out)

    def test_each_upward_include_fails_naming_file_line_and_header(self):
        planted = {
            "allocator/cuda_memory.cpp": '#include "allocator/error.h"\n'
                                         '#include "kernels/cuda/cuda_check.h"\n',
            "kernels/cpu/gemm.cpp": '// a comment\n#include "engine/tensor.h"\n',
            "engine/storage.cpp": '#  include "autograd/node.h"\n',
            "autograd/node.cpp": '#include "tests/support/temp_dir.h"\n',
        }
        with tempfile.TemporaryDirectory() as d:
            plant(d, dict(CLEAN, **planted))
            status, out = run_check(d)
        self.assertEqual(status, 1, out)
        lines = [line for line in out.splitlines() if not line.startswith("check_layers:")]
        self.assertEqual(lines, [
            'allocator/cuda_memory.cpp:2: includes "kernels/cuda/cuda_check.h" '
            "(allocator may not use kernels)",
            'autograd/node.cpp:1: includes "tests/support/temp_dir.h" (autograd may not use tests)',
            'engine/storage.cpp:1: includes "autograd/node.h" (engine may not use autograd)',
            'kernels/cpu/gemm.cpp:2: includes "engine/tensor.h" (kernels may not use engine)',
        ])
        self.assertIn("4 forbidden include(s)", out)

    def test_a_header_found_next_to_the_file_has_that_folder_s_layer(self):
        with tempfile.TemporaryDirectory() as d:
            plant(d, dict(CLEAN, **{"allocator/sneaky.h": '#include "../engine/tensor.h"\n'}))
            status, out = run_check(d)
        self.assertEqual(status, 1, out)
        self.assertIn('allocator/sneaky.h:1: includes "../engine/tensor.h"', out)

    def test_a_folder_without_layers_is_an_error_not_a_pass(self):
        with tempfile.TemporaryDirectory() as d:
            status, _ = run_check(d)
        self.assertEqual(status, 2)


if __name__ == "__main__":
    unittest.main()
