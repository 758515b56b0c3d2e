#!/usr/bin/env python3
"""Sums the doctest results of every test executable in a `meson test` log.

Prints one line, "N passed, M failed" (", K skipped" when any case was skipped), and exits
non-zero if anything failed. An executable that failed without a doctest summary (a crash, a
sanitizer report at exit, a timeout) counts as one failed case, so nothing is hidden; a test
that is not a doctest executable (the docs check) counts as one case.
"""
import json
import re
import sys

SUMMARY = re.compile(
    r"\[doctest\] test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed\s*\|\s*(\d+) skipped")
SKIPPED_EXE = re.compile(r"skipped: .*\((\d+) test cases\)")


def main(path):
    passed = failed = skipped = 0
    problems = []
    try:
        with open(path, encoding="utf-8") as f:
            entries = [json.loads(line) for line in f if line.strip()]
    except OSError as e:
        print(f"cannot read the test log: {e}", file=sys.stderr)
        print("0 passed, 1 failed")
        return 1
    for entry in entries:
        out = entry.get("stdout", "") or ""
        result = entry.get("result", "")
        found = SUMMARY.findall(out)
        if result == "SKIP":
            m = SKIPPED_EXE.search(out)
            skipped += int(m.group(1)) if m else 1
            continue
        if not found:
            # A test that is not a doctest executable (e.g. the docs check) is one case.
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            else:
                failed += 1
                problems.append(f"{entry.get('name')}: {result} without a doctest summary")
            continue
        _, p, fl, sk = (int(x) for x in found[-1])
        passed += p
        failed += fl
        skipped += sk
        if result not in ("OK", "EXPECTEDFAIL") and fl == 0:
            failed += 1
            problems.append(f"{entry.get('name')}: {result} after its cases passed (exit status)")
    for p in problems:
        print(p, file=sys.stderr)
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build/meson-logs/testlog.json"))
