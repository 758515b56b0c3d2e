#!/usr/bin/env bash
# The GPU kit: everything a GPU machine without Debian's packages needs to build memgrad's CUDA
# backend and prove it, in one command there.
#
#   tools/gpu_kit.sh pack              (CPU machine) copies the header-only dependencies (Eigen,
#                                      doctest, nlohmann-json, CLI11, fmt) and zlib (headers and
#                                      libz.a) into .carry/gpu/, and prints what travels
#   tools/gpu_kit.sh check             (CPU machine) with -Ddeps_dir=.carry/gpu and the system's
#                                      copies of those headers hidden (a mount namespace):
#                                      preprocesses every source of the build (library, tests,
#                                      examples), so each include must come from the kit, and
#                                      compiles, links and runs a program on the kit's zlib and
#                                      header-only fmt. What the kit must prove is that it holds
#                                      every dependency; the GPU machine compiles the rest.
#   tools/gpu_kit.sh run [OUT] [--dry-run]
#                                      (GPU machine) probes the machine, builds with CUDA from the
#                                      kit, runs the CUDA suite, every behaviour example on cuda:0
#                                      and the PyTorch comparison, and writes OUT/report.md and
#                                      OUT/report.json (default gpu-report/); --dry-run prints the
#                                      steps and checks the kit and the tools, running nothing
#
# `./memgrad gpu-kit ...` runs this script. What `run` needs on the GPU machine: nvcc, g++ with
# OpenMP, meson, ninja, python3 (and torch for the comparison); all present on the lent
# machines, which have no package registry.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KIT="$ROOT/.carry/gpu"
cd "$ROOT"

log() { printf '[gpu-kit] %s\n' "$*" >&2; }
die() { printf '[gpu-kit] error: %s\n' "$*" >&2; exit 1; }

# The system paths the kit copies, and where each goes under $KIT/include.
HEADER_DIRS=(/usr/include/eigen3/Eigen /usr/include/eigen3/unsupported /usr/include/doctest
  /usr/include/nlohmann /usr/include/CLI /usr/include/fmt)
HEADER_FILES=(/usr/include/zlib.h /usr/include/zconf.h)
STATIC_LIBS=(/usr/lib/x86_64-linux-gnu/libz.a)

mib() { du -sm "$1" | cut -f1; }

cmd_pack() {
  local p
  for p in "${HEADER_DIRS[@]}" "${HEADER_FILES[@]}" "${STATIC_LIBS[@]}"; do
    [[ -e $p ]] || die "$p is missing (./memgrad gpu-kit pack installs the build packages first)"
  done
  rm -rf "$KIT"
  mkdir -p "$KIT/include" "$KIT/lib"
  for p in "${HEADER_DIRS[@]}"; do cp -r "$p" "$KIT/include/"; done
  cp "${HEADER_FILES[@]}" "$KIT/include/"
  cp "${STATIC_LIBS[@]}" "$KIT/lib/"
  cp "$ROOT/tools/gpu_kit.sh" "$KIT/gpu_kit.sh"
  local tree
  tree=$(git -C "$ROOT" ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
  local total=$(( tree / 1048576 + $(mib "$KIT") ))
  echo "gpu kit: $KIT ($(mib "$KIT") MiB: $(find "$KIT/include" -name '*.h' -o -name '*.hpp' | wc -l) headers, libz.a)"
  echo "travels to the GPU machine: about $total MiB with the working tree (limit 64 MiB)"
  (( total < 64 )) || die "the kit and the tree are over 64 MiB"
  echo "next, on the GPU machine: ./memgrad gpu-kit run gpu-report   (carry .carry)"
}

# Proves the kit holds every dependency, without compiling the project twice: with the system's
# copies of the kit's headers hidden behind empty folders in a private mount namespace, every
# source of a kit configuration (library, tests, examples: what `run` builds on the GPU machine)
# is preprocessed, so a header found anywhere but in the kit fails; and a small program on the
# kit's libz.a and header-only fmt is compiled, linked and run.
cmd_check() {
  [[ -d $KIT/include ]] || die "no kit in $KIT: run ./memgrad gpu-kit pack first"
  local build="$ROOT/build-kit" empty build_log
  empty=$(mktemp -d)
  build_log=$(mktemp)
  rm -rf "$build"
  unshare --mount --propagation private bash -euo pipefail -c '
    empty=$1; kit=$2; build=$3; log=$4; root=$5
    for d in /usr/include/eigen3 /usr/include/doctest /usr/include/nlohmann /usr/include/CLI /usr/include/fmt; do
      mount --bind "$empty" "$d"
    done
    for f in /usr/include/zlib.h /usr/include/zconf.h; do mount --bind /dev/null "$f"; done
    meson setup "$build" -Dcuda=disabled -Ddeps_dir="$kit" -Dblas=disabled -Dbench=false \
      >"$log" 2>&1 || { cat "$log"; exit 1; }
    python3 "$root/tools/preprocess_all.py" "$build" || exit 1
    smoke="$build/kit_link.cpp"
    printf "%s\n" "#include <fmt/format.h>" "#include <zlib.h>" "#include <cstring>" \
      "int main() { const char* s = \"memgrad\";" \
      "  const unsigned long crc = crc32(0, reinterpret_cast<const Bytef*>(s), std::strlen(s));" \
      "  fmt::print(\"kit link: zlib crc32 {:08x}, fmt header-only\\n\", crc); return 0; }" >"$smoke"
    g++ -std=c++20 -DFMT_HEADER_ONLY -isystem "$kit/include" "$smoke" "$kit/lib/libz.a" \
      -o "$build/kit_link"
    "$build/kit_link"
  ' check "$empty" "$KIT" "$build" "$build_log" "$ROOT"
  rmdir "$empty"
  rm -f "$build_log"
  echo "gpu kit check: every source preprocessed and a program linked from $KIT alone (system headers hidden)"
}

# ---- run (on the GPU machine) ----

OUT=gpu-report
DRY=0
STEP_NAMES=()
STEP_STATUS=()
STEP_SECONDS=()

# step NAME WHAT FUNCTION: runs (or, with --dry-run, prints) one step, logging to
# $OUT/NAME.log, and records its status and duration; a failing step does not stop the others.
step() {
  local name=$1 what=$2
  shift 2
  if [[ $DRY -eq 1 ]]; then
    printf 'would run [%s]: %s\n' "$name" "$what"
    return 0
  fi
  log "$name: $what"
  local start=$SECONDS status=0
  "$@" >"$OUT/$name.log" 2>&1 || status=$?
  STEP_NAMES+=("$name")
  STEP_STATUS+=("$status")
  STEP_SECONDS+=($((SECONDS - start)))
  tail -3 "$OUT/$name.log" >&2 || true
  return 0
}

probe() {
  echo "date: $(date -u)"
  echo "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
  echo "nvcc: $(nvcc --version 2>&1 | tail -1)"
  echo "g++: $(g++ --version 2>&1 | head -1)"
  echo "meson: $(meson --version 2>&1)  ninja: $(ninja --version 2>&1)"
  echo "python: $(python3 --version 2>&1)"
  python3 -c 'import torch; print("torch:", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -1
  echo "cpus: $(nproc)"
}

configure_gpu() {
  rm -rf build-gpu
  meson setup build-gpu -Dcuda=enabled -Ddeps_dir="$KIT" -Dblas=disabled -Dbench=false
}

build_gpu() { ninja -C build-gpu -j "$(nproc)"; }

cuda_suite() { meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 4 --suite cuda; }

behaviours_on_gpu() {
  python3 tools/run_example.py --build-dir build-gpu all --device cuda:0
}

comparison() { COMPARISON_OUT="$OUT" examples/gpu/run_comparison.sh build-gpu; }

# report.json and report.md from the steps' statuses and logs; the summary is printed last.
write_report() {
  python3 - "$OUT" "${#STEP_NAMES[@]}" "${STEP_NAMES[@]}" "${STEP_STATUS[@]}" "${STEP_SECONDS[@]}" <<'PY'
import json, os, re, sys
out, n = sys.argv[1], int(sys.argv[2])
names, statuses, seconds = sys.argv[3:3 + n], sys.argv[3 + n:3 + 2 * n], sys.argv[3 + 2 * n:3 + 3 * n]
def log(name):
    try:
        return open(os.path.join(out, name + ".log"), encoding="utf-8", errors="replace").read()
    except OSError:
        return ""
steps = [{"name": a, "status": int(b), "seconds": int(c)} for a, b, c in zip(names, statuses, seconds)]
report = {"steps": steps, "probe": log("probe").splitlines()}
suite = re.findall(r"\[doctest\] test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed\s*\|\s*(\d+) skipped", log("cuda_suite"))
if suite:
    report["cuda_suite"] = dict(zip(("cases", "passed", "failed", "skipped"), map(int, suite[-1])))
m = re.search(r"(\d+) of (\d+) behaviour examples matched", log("behaviours"))
if m:
    report["behaviours_matched"] = [int(m.group(1)), int(m.group(2))]
report["comparison"] = log("comparison").splitlines()[-40:]
for name in ("memgrad.json", "pytorch.json"):
    path = os.path.join(out, name)
    if os.path.exists(path):
        try:
            report[name] = json.load(open(path))
        except ValueError:
            pass
json.dump(report, open(os.path.join(out, "report.json"), "w"), indent=1)
lines = ["# memgrad GPU run", "", "```text", *report["probe"], "```", "", "| step | status | seconds |", "|---|---|---|"]
lines += [f"| {s['name']} | {'ok' if s['status'] == 0 else 'FAILED (' + str(s['status']) + ')'} | {s['seconds']} |" for s in steps]
if "cuda_suite" in report:
    c = report["cuda_suite"]
    lines += ["", f"CUDA suite: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped"]
if "behaviours_matched" in report:
    a, b = report["behaviours_matched"]
    lines += [f"Behaviour examples on cuda:0: {a} of {b} matched their expectations"]
lines += ["", "## memgrad and PyTorch side by side", "", "```text", *report["comparison"], "```"]
open(os.path.join(out, "report.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(["", "==== GPU run summary ===="] + lines[lines.index("| step | status | seconds |"):]))
PY
}

cmd_run() {
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --dry-run) DRY=1 ;;
      -*) die "unknown flag '$1'" ;;
      *) OUT=$1 ;;
    esac
    shift
  done
  [[ -d /usr/local/cuda/bin ]] && export PATH="/usr/local/cuda/bin:$PATH"
  local missing=() tool
  for tool in nvcc g++ meson ninja python3; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  [[ -d $KIT/include ]] || missing+=("the kit ($KIT: run ./memgrad gpu-kit pack on a CPU machine and carry .carry)")
  if [[ $DRY -eq 1 ]]; then
    echo "gpu kit run --dry-run: kit $( [[ -d $KIT/include ]] && echo present || echo MISSING ), output folder $OUT"
    [[ ${#missing[@]} -eq 0 ]] || echo "missing here: ${missing[*]} (fine on a CPU machine; needed on the GPU machine)"
  else
    [[ ${#missing[@]} -eq 0 ]] || die "missing: ${missing[*]}"
    mkdir -p "$OUT"
    OUT=$(cd "$OUT" && pwd)
  fi
  step probe "nvidia-smi, nvcc, g++, meson, python3 and torch versions" probe
  step configure "meson setup build-gpu -Dcuda=enabled -Ddeps_dir=$KIT -Dblas=disabled" configure_gpu
  step build "ninja -C build-gpu -j $(nproc)" build_gpu
  step cuda_suite "meson test -C build-gpu --suite cuda (the CUDA kernels, memory and nn cases)" cuda_suite
  step behaviours "tools/run_example.py --build-dir build-gpu all --device cuda:0" behaviours_on_gpu
  step comparison "examples/gpu/run_comparison.sh build-gpu (memgrad and PyTorch, same programs; a transformer step's estimate on meta:0 next to PyTorch's max_memory_allocated/reserved)" comparison
  if [[ $DRY -eq 1 ]]; then
    echo "would write: $OUT/report.md, $OUT/report.json and each step's log; PyTorch snapshots: not part of the kit; record them with tools/pytorch_snapshot.py (traces/pytorch/README.md)"
    return 0
  fi
  write_report
  local s
  for s in "${STEP_STATUS[@]}"; do [[ $s -eq 0 ]] || return 1; done
}

case "${1:-}" in
  pack) shift; cmd_pack "$@" ;;
  check) shift; cmd_check "$@" ;;
  run) shift; cmd_run "$@" ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
