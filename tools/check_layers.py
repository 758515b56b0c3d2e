#!/usr/bin/env python3
"""Checks that no library file includes a header of a layer above its own.

usage: check_layers.py [ROOT]

memgrad's layers, lowest first: allocator <- kernels <- engine <- autograd; examples/, bench/,
tests/ and tools/ sit on top of all four. A file may include headers of its own layer and of the
layers below it (engine/nn/ may include engine/, engine/ may include engine/nn/: subfolders
belong to their layer). So allocator/ includes only allocator/, kernels/ never engine/ or
autograd/, engine/ never autograd/ (it reaches autograd through the seam it declares), and none
of the four includes examples/, bench/, tests/ or tools/.

Scans every .h, .cpp, .cu and .cuh file under allocator/, kernels/, engine/ and autograd/ of ROOT
(the repository, by default the folder above this script's) for `#include "..."` lines. An
include names its layer by its first path component (includes are root-relative); one without a
known first component is resolved against the including file's folder, and is ignored when it is
not found there (a system, third-party or generated header). Every include line counts, whatever
#if it sits under: the rule is about the source, not one configuration. The static libraries do
not enforce this (a static archive links whatever its objects name), so this script does; CI and
`./memgrad test` run it.

Prints one line per violation, `file:line: includes "header" (layer above layer)`, and a summary;
exits 1 when there is any violation, 2 when ROOT has none of the four folders, 0 otherwise.
"""
import os
import re
import sys

# Rank of each top-level folder: a file may include a folder of its own rank or below.
LAYERS = {"allocator": 0, "kernels": 1, "engine": 2, "autograd": 3}
ON_TOP = ("examples", "bench", "tests", "tools")
RANKS = dict(LAYERS, **{name: len(LAYERS) for name in ON_TOP})
EXTENSIONS = (".h", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def layer_of_include(header, including_file, root):
    """The top-level folder `header` belongs to, or None for a header outside the project."""
    first = header.split("/", 1)[0]
    if first in RANKS and "/" in header:
        return first
    # Not root-relative: a header next to the including file, or a system/generated one.
    local = os.path.normpath(os.path.join(os.path.dirname(including_file), header))
    if os.path.isfile(local):
        rel = os.path.relpath(local, root).replace(os.sep, "/")
        top = rel.split("/", 1)[0]
        return top if top in RANKS else None
    return None


def source_files(root):
    """Every file to check, as paths relative to `root`, sorted."""
    found = []
    for layer in LAYERS:
        top = os.path.join(root, layer)
        for folder, dirs, files in os.walk(top):
            dirs.sort()
            for name in files:
                if name.endswith(EXTENSIONS):
                    found.append(os.path.relpath(os.path.join(folder, name), root))
    return sorted(p.replace(os.sep, "/") for p in found)


def violations(root):
    """(file, line number, header, its layer, the file's layer) for each upward include."""
    out = []
    for rel in source_files(root):
        own = rel.split("/", 1)[0]
        path = os.path.join(root, rel)
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, start=1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = layer_of_include(m.group(1), path, root)
                if target is not None and RANKS[target] > RANKS[own]:
                    out.append((rel, number, m.group(1), target, own))
    return out


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if not any(os.path.isdir(os.path.join(root, layer)) for layer in LAYERS):
        print(f"check_layers: {root} has none of {', '.join(LAYERS)}", file=sys.stderr)
        return 2
    found = violations(root)
    for rel, number, header, target, own in found:
        print(f'{rel}:{number}: includes "{header}" ({target} above {own})')
    checked = len(source_files(root))
    if found:
        print(f"check_layers: {len(found)} upward include(s) in {checked} files "
              f"(order: {' <- '.join(LAYERS)} <- {', '.join(ON_TOP)})")
        return 1
    print(f"check_layers: {checked} files, every include points down or sideways")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
