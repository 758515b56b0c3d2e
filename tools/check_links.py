#!/usr/bin/env python3
"""Checks the links between the project's Markdown files: every relative link points to a file
that exists, and every #anchor to a heading (or an explicit <a id> / <a name>) of its target, as
GitHub renders them. Web links are not fetched. Exits 1 and names each broken link (file:line).

usage: tools/check_links.py [ROOT]
"""
import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
FENCE = re.compile(r"^\s*(```|~~~)")


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def markdown_lines(path):
    """(line number, text) of the lines outside fenced code blocks."""
    inside = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                inside = not inside
                continue
            if not inside:
                yield number, line


def anchors(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        for _, line in markdown_lines(path):
            m = HEADING.match(line)
            if m:
                base = slug(m.group(2))
                # Repeated headings get -1, -2, ... as GitHub numbers them.
                count = seen.get(base, 0)
                seen[base] = count + 1
                found.add(base if count == 0 else f"{base}-{count}")
            found.update(EXPLICIT.findall(line))
        cache[path] = found
    return cache[path]


def markdown_files(root):
    """README.md and docs/, without docs/memory-guide/: those sections are parts of
    docs/memory-guide.md (their links are relative to docs/), which is checked whole."""
    files = [os.path.join(root, "README.md")]
    parts = os.path.join(root, "docs", "memory-guide")
    for folder, dirs, names in os.walk(os.path.join(root, "docs")):
        if os.path.abspath(folder) == os.path.abspath(parts):
            continue
        files += [os.path.join(folder, n) for n in sorted(names) if n.endswith(".md")]
    return [f for f in files if os.path.exists(f)]


def broken_links(root):
    broken = []
    for path in markdown_files(root):
        for number, line in markdown_lines(path):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                    if file_part else path
                where = f"{os.path.relpath(path, root)}:{number}"
                if not os.path.exists(dest):
                    broken.append(f"{where}: {target}: no such file")
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    broken.append(f"{where}: {target}: no heading with anchor #{anchor}")
    return broken


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    broken = broken_links(root)
    for line in broken:
        print(line)
    print(f"{len(markdown_files(root))} Markdown files, {len(broken)} broken links")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
