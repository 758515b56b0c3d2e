#!/usr/bin/env bash
# The GPU comparison of memgrad with PyTorch, side by side. Run on a machine with a CUDA GPU,
# nvcc, memgrad's build dependencies, python3 and torch:
#   examples/gpu/run_comparison.sh [build-dir]        (default build-cuda)
# Configures the build directory with -Dcuda=enabled when it does not exist, builds
# compare_memgrad, runs it and compare_pytorch.py, keeps both JSON files, and prints every phase's
# memory_allocated / memory_reserved / max_memory_allocated (MiB) and the timings of both. Each
# side runs even when the other fails (its columns then show "-"); the exit status is 1 if
# either failed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build-cuda}
export PATH=/usr/local/cuda/bin:$PATH
cd "$root"
status=0
if [[ ! -d $build ]]; then
  meson setup "$build" -Dcuda=enabled || status=1
fi
out=${COMPARISON_OUT:-$(mktemp -d)}
mkdir -p "$out"
if ninja -C "$build" examples/gpu/compare_memgrad; then
  "$build/examples/gpu/compare_memgrad" --device cuda:0 > "$out/memgrad.json" ||
    { echo "run_comparison: compare_memgrad failed (status $?)" >&2; status=1; }
else
  echo "run_comparison: compare_memgrad did not build" >&2
  : > "$out/memgrad.json"
  status=1
fi
python3 examples/gpu/compare_pytorch.py --device cuda:0 > "$out/pytorch.json" ||
  { echo "run_comparison: compare_pytorch.py failed (status $?)" >&2; status=1; }
echo "JSON: $out/memgrad.json $out/pytorch.json"
python3 - "$out/memgrad.json" "$out/pytorch.json" <<'PY' || status=1
import json
import sys


def load(path, who):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        missing.append(f"{who}: no result ({path}: {e})")
        return {"device": "-", "phases": [], "timings": {}, "notes": []}


missing = []
mine, theirs = load(sys.argv[1], "memgrad"), load(sys.argv[2], "pytorch")
index = {(p["behaviour"], p["phase"]): p for p in theirs["phases"]}
mib = lambda b: f"{b / 2**20:9.2f}" if b is not None else "        -"
print(f"memgrad on {mine['device']} vs PyTorch on {theirs['device']} ({', '.join(theirs['notes'])})")
print(f"{'behaviour / phase':52} {'allocated MiB':>21} {'reserved MiB':>21} {'max allocated MiB':>21}")
print(f"{'':52} {'memgrad   pytorch':>21} {'memgrad   pytorch':>21} {'memgrad   pytorch':>21}")
# The estimate's rows (memgrad on a meta device) stand next to PyTorch's measured ones; PyTorch's
# rows without a memgrad row (memgrad's side failed) follow.
key = lambda p: (p["behaviour"].removesuffix(" estimate"), p["phase"])
rows = [(p, index.get(key(p), {})) for p in mine["phases"]]
shown = {key(p) for p in mine["phases"]}
rows += [({"behaviour": q["behaviour"], "phase": q["phase"]}, q) for q in theirs["phases"]
         if key(q) not in shown]
for p, q in rows:
    row = f"{p['behaviour'] + ' / ' + p['phase']:52}"
    for k in ("allocated", "reserved", "max_allocated"):
        row += f" {mib(p.get(k))} {mib(q.get(k))}  "
    print(row)
for k in sorted(set(mine["timings"]) | set(theirs["timings"])):
    a, b = mine["timings"].get(k), theirs["timings"].get(k)
    print(f"{k:52} memgrad {a if a is not None else '-':>10}   pytorch {b if b is not None else '-':>10}")
for note in mine["notes"]:
    print(f"memgrad note: {note}")
for line in missing:
    print(line)
sys.exit(1 if missing else 0)
PY
exit "$status"
