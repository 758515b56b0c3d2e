#!/usr/bin/env python3
"""Tests of tools/check_links.py on planted Markdown trees: a good tree passes; a missing file, a
missing anchor and a broken link inside a fenced block (ignored) behave as stated."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "..", "..", "tools", "check_links.py")


def run(files):
    with tempfile.TemporaryDirectory() as root:
        for name, text in files.items():
            path = os.path.join(root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        result = subprocess.run([sys.executable, CHECKER, root], capture_output=True, text=True)
        return result.returncode, result.stdout


def main():
    failures = []

    def expect(name, condition):
        if not condition:
            failures.append(name)

    good = {
        "README.md": "See [the guide](docs/guide.md#b20--profiling-memory-over-time) and "
                     "[web](https://example.org/x#y).\n",
        "docs/guide.md": "# Guide\n\n## B20 — profiling memory over time\n\n[up](../README.md)\n"
                         "```\n[not a link](nowhere.md)\n```\n",
    }
    code, out = run(good)
    expect("a tree whose links resolve passes", code == 0 and "0 broken links" in out)

    bad_anchor = dict(good)
    bad_anchor["README.md"] = "[the guide](docs/guide.md#b20)\n"
    code, out = run(bad_anchor)
    expect("a missing anchor fails and names file, line and anchor",
           code == 1 and "README.md:1: docs/guide.md#b20: no heading with anchor #b20" in out)

    bad_file = dict(good)
    bad_file["docs/guide.md"] = "# Guide\n\n[gone](../engine/gone.cpp)\n"
    code, out = run(bad_file)
    expect("a missing file fails", code == 1 and "docs/guide.md:3: ../engine/gone.cpp: no such file"
           in out)

    repeated = {"README.md": "# A\n## A\n[second](#a-1)\n[missing](#a-2)\n"}
    code, out = run(repeated)
    expect("repeated headings are numbered as GitHub numbers them",
           code == 1 and "#a-2" in out and "#a-1:" not in out)

    for name in failures:
        print(f"FAILED: {name}")
    print(f"{4 - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
