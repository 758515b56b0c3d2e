#!/usr/bin/env bash
# The GPU comparison of memgrad with PyTorch, side by side. Run on a machine with a CUDA GPU,
# nvcc, memgrad's build dependencies, python3 and torch:
#   examples/gpu/run_comparison.sh [build-dir]        (default build-cuda)
# Configures the build directory with -Dcuda=enabled when it does not exist, builds
# compare_memgrad, runs it and compare_pytorch.py, keeps both JSON files, and prints every phase's
# memory_allocated / memory_reserved / max_memory_allocated (MiB) and the timings of both.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build-cuda}
export PATH=/usr/local/cuda/bin:$PATH
cd "$root"
if [[ ! -d $build ]]; then
  meson setup "$build" -Dcuda=enabled
fi
ninja -C "$build" examples/gpu/compare_memgrad
out=${COMPARISON_OUT:-$(mktemp -d)}
"$build/examples/gpu/compare_memgrad" --device cuda:0 > "$out/memgrad.json"
python3 examples/gpu/compare_pytorch.py --device cuda:0 > "$out/pytorch.json"
echo "JSON: $out/memgrad.json $out/pytorch.json"
python3 - "$out/memgrad.json" "$out/pytorch.json" <<'PY'
import json
import sys

mine, theirs = (json.load(open(p)) for p in sys.argv[1:3])
index = {(p["behaviour"], p["phase"]): p for p in theirs["phases"]}
mib = lambda b: f"{b / 2**20:9.2f}" if b is not None else "        -"
print(f"memgrad on {mine['device']} vs PyTorch on {theirs['device']} ({', '.join(theirs['notes'])})")
print(f"{'behaviour / phase':52} {'allocated MiB':>21} {'reserved MiB':>21} {'max allocated MiB':>21}")
print(f"{'':52} {'memgrad   pytorch':>21} {'memgrad   pytorch':>21} {'memgrad   pytorch':>21}")
for p in mine["phases"]:
    # The estimate's rows (memgrad on a meta device) stand next to PyTorch's measured ones.
    q = index.get((p["behaviour"].removesuffix(" estimate"), p["phase"]), {})
    row = f"{p['behaviour'] + ' / ' + p['phase']:52}"
    for key in ("allocated", "reserved", "max_allocated"):
        row += f" {mib(p[key])} {mib(q.get(key))}  "
    print(row)
for key in sorted(set(mine["timings"]) | set(theirs["timings"])):
    a, b = mine["timings"].get(key), theirs["timings"].get(key)
    print(f"{key:52} memgrad {a if a is not None else '-':>10}   pytorch {b if b is not None else '-':>10}")
for note in mine["notes"]:
    print(f"memgrad note: {note}")
PY
