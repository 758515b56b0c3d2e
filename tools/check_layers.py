#!/usr/bin/env python3
"""Checks that no library file includes a header of a room it may not use.

usage: check_layers.py [ROOT]

memgrad's library is a house of rooms, each a folder (docs/architecture.md draws it). A file may
include headers of its own room and of the rooms below it, and of nothing else:

    base          errors, atomic file writing                 uses nothing
    allocator     the allocator core                          base
    interop       PyTorch's formats                           base, allocator
    lab           lab policies, planner, replay, registry     base, allocator, interop
    kernels       compute kernels (CPU, CUDA)                 base, allocator
    engine        tensors, ops, nn, optim, data, io           all of the above
    autograd      graph, backward, checkpoint, autocast       engine and below
    distributed   process groups, DDP, ZeRO                   autograd and below

So the core never includes interop/ or lab/, the kernels never the lab, the engine never
autograd/ (it reaches autograd through the seam it declares) nor distributed/. Programs sit on
top of every room and may include anything: examples/, bench/, tests/, tools/ and the lab's own
programs, lab/cli/ and lab/bench/ (a sub-room: a path belongs to the longest folder named here).
No room includes a program's header.

Scans every .h, .cpp, .cu and .cuh file of the rooms under ROOT (the repository, by default the
folder above this script's) for `#include "..."` lines. An include names its room by its path
(includes are root-relative); one that names no room is resolved against the including file's
folder, and is ignored when it is not found there (a system, third-party or generated header).
Every include line counts, whatever #if it sits under: the rule is about the source, not one
configuration. Static archives do not enforce this (an archive links whatever its objects name),
so this script does; CI and `./memgrad test` run it.

Prints one line per violation, `file:line: includes "header" (room may not use room)`, and a
summary; exits 1 when there is any violation, 2 when ROOT has none of the rooms, 0 otherwise.
"""
import os
import re
import sys

# Each room and the rooms its files may include besides its own, lowest room first.
ROOMS = {
    "base": (),
    "allocator": ("base",),
    "interop": ("base", "allocator"),
    "lab": ("base", "allocator", "interop"),
    "kernels": ("base", "allocator"),
    "engine": ("base", "allocator", "interop", "lab", "kernels"),
    "autograd": ("base", "allocator", "interop", "lab", "kernels", "engine"),
    "distributed": ("base", "allocator", "interop", "lab", "kernels", "engine", "autograd"),
}
# Folders of programs, on top of every room.
ON_TOP = ("examples", "bench", "tests", "tools", "lab/cli", "lab/bench")
EXTENSIONS = (".h", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def room_of(rel):
    """The room or program folder a root-relative path belongs to (the longest that holds it),
    or None."""
    best = None
    for name in list(ROOMS) + list(ON_TOP):
        if (rel == name or rel.startswith(name + "/")) and (best is None or len(name) > len(best)):
            best = name
    return best


def room_of_include(header, including_file, root):
    """The room (or program folder) of `header`, or None for a header outside the project."""
    if "/" in header:
        named = room_of(header)
        if named is not None:
            return named
    # Not root-relative: a header next to the including file, or a system/generated one.
    local = os.path.normpath(os.path.join(os.path.dirname(including_file), header))
    if os.path.isfile(local):
        return room_of(os.path.relpath(local, root).replace(os.sep, "/"))
    return None


def may_use(own, target):
    """Whether a file of room `own` may include a header of `target`."""
    if target == own:
        return True
    if own in ON_TOP:
        return True
    return target in ROOMS.get(own, ())


def source_files(root):
    """Every room file to check, as paths relative to `root`, sorted."""
    found = []
    for room in ROOMS:
        for folder, dirs, files in os.walk(os.path.join(root, room)):
            dirs.sort()
            for name in files:
                if name.endswith(EXTENSIONS):
                    rel = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
                    if room_of(rel) in ROOMS:  # not a program folder inside a room
                        found.append(rel)
    return sorted(found)


def violations(root):
    """(file, line number, header, its room, the file's room) for each forbidden include."""
    out = []
    for rel in source_files(root):
        own = room_of(rel)
        path = os.path.join(root, rel)
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, start=1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = room_of_include(m.group(1), path, root)
                if target is not None and not may_use(own, target):
                    out.append((rel, number, m.group(1), target, own))
    return out


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if not any(os.path.isdir(os.path.join(root, room)) for room in ROOMS):
        print(f"check_layers: {root} has none of {', '.join(ROOMS)}", file=sys.stderr)
        return 2
    found = violations(root)
    for rel, number, header, target, own in found:
        print(f'{rel}:{number}: includes "{header}" ({own} may not use {target})')
    checked = len(source_files(root))
    if found:
        print(f"check_layers: {len(found)} forbidden include(s) in {checked} files "
              f"(rooms, lowest first: {', '.join(ROOMS)}; programs on top: {', '.join(ON_TOP)})")
        return 1
    print(f"check_layers: {checked} files, every include stays in its room or goes below it")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
