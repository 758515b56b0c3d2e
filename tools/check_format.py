#!/usr/bin/env python3
"""Checks that every C++ file of the project is formatted as .clang-format says.

usage: check_format.py [ROOT] [--fix] [--skip-missing]

Runs clang-format (Debian 12's, version 14) over every .h, .cpp, .cu and .cuh file under ROOT's
source folders (not build folders) and lists the files it would change, with the first lines
that differ. --fix formats them in place instead. Exits 1 when a file is not formatted, 2 when
clang-format is missing (77, Meson's "skipped", with --skip-missing: the GPU kit's machine has
no clang-format), 0 otherwise. CI runs it first, and `./memgrad test` as the `format`
test. Tables aligned by hand are kept between `// clang-format off` and `// clang-format on`.
"""
import difflib
import os
import shutil
import subprocess
import sys

FOLDERS = ("base", "allocator", "interop", "lab", "kernels", "engine", "autograd", "distributed",
           "examples", "bench", "tests", "tools")
EXTENSIONS = (".h", ".cpp", ".cu", ".cuh")


def sources(root):
    found = []
    for top in FOLDERS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            found += [os.path.join(folder, f) for f in sorted(files) if f.endswith(EXTENSIONS)]
    return found


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    fix = "--fix" in argv[1:]
    skip_missing = "--skip-missing" in argv[1:]
    root = os.path.abspath(args[0] if args else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    tool = shutil.which("clang-format")
    if tool is None:
        print("check_format: clang-format not found (apt-get install clang-format)",
              file=sys.stderr)
        return 77 if skip_missing else 2
    files = sources(root)
    if fix:
        subprocess.run([tool, "-i", "--style=file"] + files, check=True, cwd=root)
        print(f"check_format: formatted {len(files)} files")
        return 0
    bad = []
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        formatted = subprocess.run([tool, "--style=file", f"--assume-filename={path}"],
                                   input=text, capture_output=True, text=True, check=True,
                                   cwd=root).stdout
        if formatted != text:
            rel = os.path.relpath(path, root)
            diff = list(difflib.unified_diff(text.splitlines(), formatted.splitlines(),
                                             rel, rel + " (clang-format)", n=0, lineterm=""))
            bad.append(rel)
            print("\n".join(diff[:12]))
    if bad:
        print(f"check_format: {len(bad)} of {len(files)} files are not formatted "
              f"(tools/check_format.py --fix formats them): {', '.join(bad)}")
        return 1
    print(f"check_format: {len(files)} files, all formatted as .clang-format says")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
