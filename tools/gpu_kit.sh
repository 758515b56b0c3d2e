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
#   tools/gpu_kit.sh run [OUT] [--retry PREV] [--only STEPS] [--dry-run]
#                                      (GPU machine) probes the machine, builds with CUDA from the
#                                      kit, runs the CUDA suite, every behaviour example on cuda:0
#                                      and the PyTorch comparison, and writes OUT/report.md and
#                                      OUT/report.json (default gpu-report/); --dry-run prints the
#                                      steps and checks the kit and the tools, running nothing.
#                                      Each step runs under its own time limit, all of them within
#                                      MEMGRAD_GPU_KIT_BUDGET seconds (540), and the report is
#                                      written again before and after every step, so a failed,
#                                      timed-out or killed run leaves one: on the device machine
#                                      give OUT under its $OUT, which comes back even from a
#                                      command killed at its limit. --retry PREV reruns only the
#                                      steps PREV/report.json does not record as ok (with the
#                                      build they need) and keeps the others' results; --only
#                                      probe,build,... runs those alone. Steps: probe, configure,
#                                      build, cuda_suite, behaviours, comparison
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

OUT=${GPU_KIT_OUT:-gpu-report}
DRY=0
RETRY=""  # --retry PREV: the folder of an earlier call's report; its ok steps are kept
ONLY=""   # --only a,b: these steps alone (with what they need)
# The whole run's time in seconds: each step's limit is cut to what is left of it, so that the
# report is complete inside the device machine's 10 minutes a command.
BUDGET=${MEMGRAD_GPU_KIT_BUDGET:-540}
BEHAVIOUR_LIMIT=60  # seconds for one behaviour example, so that a hang loses only that one
STEPS=(probe configure build cuda_suite behaviours comparison)
# Each step's own limit in seconds (GNU timeout: SIGTERM to its processes, SIGKILL 10 s later).
# The H100 run took 8, 5, 112, 4, 10 and 17 s.
declare -A LIMIT=([probe]=60 [configure]=120 [build]=420 [cuda_suite]=240 [behaviours]=180
  [comparison]=240)
declare -A WHAT=(
  [probe]="nvidia-smi, nvcc, g++, meson, python3 and torch versions"
  [configure]="meson setup build-gpu -Dcuda=enabled -Ddeps_dir=$KIT -Dblas=disabled"
  [build]="ninja -C build-gpu -j $(nproc)"
  [cuda_suite]="meson test -C build-gpu --suite cuda (the CUDA kernels, memory and nn cases)"
  [behaviours]="tools/run_example.py --build-dir build-gpu --timeout $BEHAVIOUR_LIMIT all --device cuda:0"
  [comparison]="examples/gpu/run_comparison.sh build-gpu (memgrad and PyTorch, same programs; a transformer step's estimate on meta:0 next to PyTorch's max_memory_allocated/reserved)")
# Each step's state (pending, running, ok, failed, timed out, stopped by SIG..., not run ...,
# ok (earlier call)), exit status, seconds and the limit it ran under.
declare -A STATE STATUS SECS USED
CURRENT=""  # the step running now
CHILD=""    # its timeout process
RUN_START=$SECONDS
STEP_START=$SECONDS

# The steps, each run by `gpu_kit.sh _step NAME` under timeout (a function cannot be).
step_probe() {
  echo "date: $(date -u)"
  echo "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
  echo "nvcc: $(nvcc --version 2>&1 | tail -1)"
  echo "g++: $(g++ --version 2>&1 | head -1)"
  echo "meson: $(meson --version 2>&1)  ninja: $(ninja --version 2>&1)"
  echo "python: $(command -v python3) $(python3 --version 2>&1)"
  echo "$(python3 -c 'import torch; print("torch:", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -1)"
  echo "cpus: $(nproc)"
}

step_configure() {
  rm -rf build-gpu
  meson setup build-gpu -Dcuda=enabled -Ddeps_dir="$KIT" -Dblas=disabled -Dbench=false
}

step_build() { ninja -C build-gpu -j "$(nproc)"; }

# --print-errorlogs prints only the failing tests' output: the counts come from testlog.json,
# which holds every test's (tools/test_summary.py sums them here, the report per test).
step_cuda_suite() {
  local status=0
  meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 4 --suite cuda || status=$?
  python3 tools/test_summary.py build-gpu/meson-logs/testlog.json || true
  return "$status"
}

step_behaviours() {
  python3 tools/run_example.py --build-dir build-gpu --timeout "$BEHAVIOUR_LIMIT" all --device cuda:0
}

step_comparison() { COMPARISON_OUT="$OUT" examples/gpu/run_comparison.sh build-gpu; }

# Which steps run: all; with --only, those named; with --retry PREV, those PREV/report.json does
# not record as ok (the others are kept, with PREV's logs). probe always runs; build runs when a
# later step does (ninja is incremental: seconds when nothing changed, the whole build on a fresh
# machine), and configure when build does and build-gpu/ is not configured.
plan_steps() {
  local name prev="" n s
  declare -A ok=() want=()
  if [[ -n $RETRY ]]; then
    prev=$(python3 - "$RETRY/report.json" <<'PY'
import json, sys
try:
    with open(sys.argv[1], encoding="utf-8") as f:
        steps = json.load(f)["steps"]
except (OSError, ValueError, KeyError, TypeError) as e:
    sys.exit(f"{type(e).__name__}: {e}")
for s in steps:
    state = s.get("state", "ok" if s.get("status") == 0 else "failed")
    if state in ("ok", "ok (earlier call)"):
        print(s["name"], s.get("seconds") or 0)
PY
) || die "--retry $RETRY: cannot read the steps of $RETRY/report.json (the folder an earlier call wrote)"
    while read -r n s; do [[ -n $n ]] && ok[$n]=$s; done <<<"$prev"
  fi
  for name in "${STEPS[@]}"; do
    STATE[$name]=pending
    if [[ $name == probe ]]; then
      want[$name]=1
    elif [[ -n $ONLY ]]; then
      [[ ,$ONLY, == *,$name,* ]] && want[$name]=1
    elif [[ -z ${ok[$name]+x} ]]; then
      want[$name]=1
    fi
  done
  [[ -n ${want[cuda_suite]:-}${want[behaviours]:-}${want[comparison]:-} ]] && want[build]=1
  [[ -n ${want[build]:-} && ! -f build-gpu/build.ninja ]] && want[configure]=1
  for name in "${STEPS[@]}"; do
    [[ -n ${want[$name]:-} ]] && continue
    if [[ -n ${ok[$name]+x} ]]; then
      STATE[$name]="ok (earlier call)"
      STATUS[$name]=0
      SECS[$name]=${ok[$name]}
    else
      STATE[$name]="not run (--only)"
    fi
  done
  return 0
}

# report.json and report.md from the steps' states and logs, written again before and after
# every step (each file replaced whole), so a run stopped anywhere, even killed, leaves a report
# of what it did; with FINAL=1 the summary is printed last. A failure of the writer leaves the
# plain table of fallback_report.
write_report() {
  local final=${1:-0} name records=()
  for name in "${STEPS[@]}"; do
    records+=("$name|${STATE[$name]}|${STATUS[$name]:-}|${SECS[$name]:-}|${USED[$name]:-}")
  done
  python3 - "$OUT" "$ROOT" "${RETRY:+$RETRY/report.json}" "$final" "${records[@]}" <<'PY' || fallback_report "$final" "${records[@]}"
import json, os, re, sys
out, root, prev_path, final = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
errors = []


def text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def log(name):
    return text(os.path.join(out, name + ".log"))


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def number(x):
    try:
        return int(x)
    except ValueError:
        return None


prev = (load(prev_path) if prev_path else None) or {}
steps = []
for record in sys.argv[5:]:
    name, state, status, seconds, limit = record.split("|")
    steps.append({"name": name, "state": state, "status": number(status),
                  "seconds": number(seconds), "limit": number(limit)})
state = {s["name"]: s["state"] for s in steps}
earlier = lambda name: state.get(name) == "ok (earlier call)"
finished = lambda name: state.get(name, "").startswith(("ok", "failed", "timed out", "stopped"))
report = {"steps": steps, "probe": log("probe").splitlines()}
if prev_path:
    report["retry_of"] = os.path.dirname(prev_path)

SUMMARY = re.compile(r"\[doctest\] test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed"
                     r"\s*\|\s*(\d+) skipped")
NO_DEVICE = re.compile(r"skipped: .*\((\d+) test cases\)")
TALLY = re.compile(r"(\d+) of (\d+) behaviour examples matched their expectations"
                   r"(?: \((\d+) skipped, this build cannot run them: ([^)]*)\))?"
                   r"(?:; mismatches: (.*))?")


def cuda_suite():
    """Each test's doctest counts from meson's testlog.json (one JSON object a line, every
    test's output), summed as tools/test_summary.py sums them."""
    if earlier("cuda_suite"):
        if "cuda_suite" in prev:
            report["cuda_suite"] = prev["cuda_suite"]
        return
    if not finished("cuda_suite"):
        return
    tests = []
    for line in text(os.path.join(root, "build-gpu", "meson-logs", "testlog.json")).splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        result, stdout = entry.get("result"), entry.get("stdout") or ""
        test = {"test": entry.get("name"), "result": result,
                "seconds": round(entry.get("duration") or 0, 1)}
        found = SUMMARY.findall(stdout)
        if found:
            test.update(zip(("cases", "passed", "failed", "skipped"), map(int, found[-1])))
        elif result == "SKIP":
            m = NO_DEVICE.search(stdout)
            test["skipped"] = int(m.group(1)) if m else 1
        elif result in ("OK", "EXPECTEDFAIL"):
            test["passed"] = 1
        if result not in ("OK", "EXPECTEDFAIL", "SKIP") and not test.get("failed"):
            test["failed"] = 1  # a crash, a timeout or an exit status after its cases passed
        tests.append(test)
    if tests:
        report["cuda_suite"] = {k: sum(t.get(k, 0) for t in tests)
                                for k in ("cases", "passed", "failed", "skipped")}
        report["cuda_suite"]["tests"] = tests


def behaviours():
    if earlier("behaviours"):
        for key in ("behaviours", "behaviours_matched"):
            if key in prev:
                report[key] = prev[key]
        return
    if not finished("behaviours"):
        return
    logged = log("behaviours")
    started = re.findall(r"^===== (\S+) =====$", logged, re.M)
    tally = list(TALLY.finditer(logged))
    names = lambda s: [n.strip() for n in s.split(", ")] if s else []
    if tally:
        m = tally[-1]
        report["behaviours_matched"] = [int(m.group(1)), int(m.group(2))]
        report["behaviours"] = {"matched": int(m.group(1)), "ran": int(m.group(2)),
                                "skipped": names(m.group(4)), "mismatches": names(m.group(5))}
    elif started:
        report["behaviours"] = {"started": started, "stopped_during": started[-1]}


def comparison():
    if not (earlier("comparison") or finished("comparison")):
        return
    lines = log("comparison").splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("memgrad on ")), None)
    # The table, after what either side said when it failed.
    said = [line for line in lines[:first] if re.match(r"(run_comparison|compare_\w+): ", line)]
    report["comparison"] = said + (lines[first:] if first is not None else lines[-60:])
    timings = {}
    for side in ("memgrad", "pytorch"):
        data = load(os.path.join(out, side + ".json"))
        if isinstance(data, dict):
            report[side + ".json"] = data
            for key, value in (data.get("timings") or {}).items():
                timings.setdefault(key, {})[side] = value
    if timings:
        report["timings"] = timings


for part in (cuda_suite, behaviours, comparison):
    try:
        part()
    except Exception as e:  # the report is written whatever a log holds
        errors.append(f"{part.__name__}: {type(e).__name__}: {e}")
if errors:
    report["report_errors"] = errors


def shown(s):
    st = s["state"]
    if st == "failed":
        return f"FAILED ({s['status']})"
    if st == "timed out":
        return f"TIMED OUT (limit {s['limit']} s)"
    if st == "running":
        return "RUNNING (in a final report: the run was killed during this step)"
    return st.upper() if st.startswith("stopped") else st


lines = ["# memgrad GPU run", ""]
if prev_path:
    lines += [f"A retry of {report['retry_of']}: steps marked 'ok (earlier call)' were not run again.", ""]
lines += ["```text", *report["probe"], "```", "", "| step | status | seconds |", "|---|---|---|"]
lines += [f"| {s['name']} | {shown(s)} | {'-' if s['seconds'] is None else s['seconds']} |"
          for s in steps]
if "cuda_suite" in report:
    c = report["cuda_suite"]
    each = ", ".join(f"{t['test']} {t['result']} {t['seconds']} s" for t in c.get("tests", []))
    lines += ["", f"CUDA suite: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped"
              + (f" ({each})" if each else "")]
b = report.get("behaviours")
if b and "ran" in b:
    lines += [f"Behaviour examples on cuda:0: {b['matched']} of {b['ran']} matched their expectations"
              + (f" ({len(b['skipped'])} skipped: {', '.join(b['skipped'])})" if b["skipped"] else "")
              + (f"; mismatches: {', '.join(b['mismatches'])}" if b["mismatches"] else "")]
elif b:
    lines += [f"Behaviour examples on cuda:0: stopped during {b['stopped_during']} "
              f"({len(b['started'])} started, no tally)"]
if "comparison" in report:
    lines += ["", "## memgrad and PyTorch side by side", "", "```text", *report["comparison"], "```"]
for s in steps:
    if s["name"] == "comparison" and any(l.startswith("memgrad on ") for l in report.get("comparison", [])):
        continue  # its table above says what failed
    if s["state"].startswith(("failed", "timed out", "stopped", "running")):
        tail = log(s["name"]).splitlines()[-8:]
        lines += ["", f"{s['name']}.log, last lines:", "", "```text", *tail, "```"]
for e in errors:
    lines += ["", f"report writer: {e}"]
redo = [s["name"] for s in steps if not s["state"].startswith(("ok", "not run (--only)"))]
if final and redo:
    lines += ["", f"Not ok: {', '.join(redo)}. To run only those again: ./memgrad gpu-kit run OUT "
              f"--retry PREV, PREV a copy of this folder (carried to the device machine: tools/gpu_kit.sh)"]
for name, body in (("report.json", json.dumps(report, indent=1) + "\n"),
                   ("report.md", "\n".join(lines) + "\n")):
    path = os.path.join(out, name)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(body)
    os.replace(path + ".tmp", path)
if final:
    print("\n".join(["", "==== GPU run summary ===="] + lines[lines.index("| step | status | seconds |"):]))
PY
}

# The steps alone, when the report writer fails (its error is on stderr).
fallback_report() {
  local final=$1 r n st c sec lim sep=""
  shift
  {
    echo "# memgrad GPU run (the report writer failed: the steps alone)"
    echo
    echo "| step | status | seconds |"
    echo "|---|---|---|"
    for r in "$@"; do
      IFS='|' read -r n st c sec lim <<<"$r"
      echo "| $n | $st${c:+ ($c)} | ${sec:--} |"
    done
  } >"$OUT/report.md"
  {
    printf '{"report_writer_failed": true, "steps": ['
    for r in "$@"; do
      IFS='|' read -r n st c sec lim <<<"$r"
      printf '%s{"name": "%s", "state": "%s", "status": %s, "seconds": %s}' \
        "$sep" "$n" "$st" "${c:-null}" "${sec:-null}"
      sep=", "
    done
    printf ']}\n'
  } >"$OUT/report.json"
  [[ $final -eq 1 ]] && cat "$OUT/report.md"
  return 0
}

# Runs one step under its limit, cut to what is left of BUDGET (a report's worth kept back), in
# the background so that a signal to this script is handled at once (on_signal).
run_step() {
  local name=$1 limit left start status=0
  limit=${LIMIT[$name]}
  left=$((BUDGET - (SECONDS - RUN_START) - 15))
  ((left < limit)) && limit=$left
  if ((limit < 10)); then
    STATE[$name]="not run: no time left"
    log "$name: not run, nothing left of the run's $BUDGET s"
    write_report
    return 0
  fi
  log "$name (limit $limit s): ${WHAT[$name]}"
  CURRENT=$name
  STATE[$name]=running
  USED[$name]=$limit
  write_report
  start=$SECONDS
  STEP_START=$start
  timeout --kill-after=10 "$limit" bash "$SELF" _step "$name" >"$OUT/$name.log" 2>&1 &
  CHILD=$!
  wait "$CHILD" || status=$?
  CHILD=""
  CURRENT=""
  SECS[$name]=$((SECONDS - start))
  STATUS[$name]=$status
  if ((status == 0)); then
    STATE[$name]=ok
  elif ((status == 124 || (status == 137 && SECS[$name] >= limit))); then
    STATE[$name]="timed out"
  else
    STATE[$name]=failed
  fi
  tail -3 "$OUT/$name.log" >&2 || true
  write_report
}

# SIGTERM, SIGINT or SIGHUP to the run: the step in progress is stopped and the report says so.
on_signal() {
  trap - TERM INT HUP
  if [[ -n $CHILD ]]; then
    kill -TERM "$CHILD" 2>/dev/null || true
    wait "$CHILD" 2>/dev/null || true
  fi
  if [[ -n $CURRENT ]]; then
    STATE[$CURRENT]="stopped by SIG$1"
    SECS[$CURRENT]=$((SECONDS - STEP_START))
  fi
  write_report 1 || true
  exit "$2"
}

cmd_run() {
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --dry-run) DRY=1 ;;
      --retry)
        [[ $# -ge 2 ]] || die "--retry needs the folder of an earlier call's report"
        RETRY=$2
        shift ;;
      --only)
        [[ $# -ge 2 ]] || die "--only needs steps, comma-separated, from: ${STEPS[*]}"
        ONLY=$2
        shift ;;
      -*) die "unknown flag '$1'" ;;
      *) OUT=$1 ;;
    esac
    shift
  done
  local s
  if [[ -n $ONLY ]]; then
    for s in ${ONLY//,/ }; do
      [[ " ${STEPS[*]} " == *" $s "* ]] || die "--only: unknown step '$s' (steps: ${STEPS[*]})"
    done
  fi
  if [[ -n $RETRY ]]; then
    [[ -f $RETRY/report.json ]] || die "--retry $RETRY: no report.json there"
    RETRY=$(cd "$RETRY" && pwd)
  fi
  [[ -d /usr/local/cuda/bin ]] && export PATH="/usr/local/cuda/bin:$PATH"
  local missing=() tool
  for tool in nvcc g++ meson ninja python3 timeout; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  [[ -d $KIT/include ]] || missing+=("the kit ($KIT: run ./memgrad gpu-kit pack on a CPU machine and carry .carry)")
  plan_steps
  if [[ $DRY -eq 1 ]]; then
    echo "gpu kit run --dry-run: kit $( [[ -d $KIT/include ]] && echo present || echo MISSING ), output folder $OUT, $BUDGET s in all${RETRY:+, retrying $RETRY}"
    [[ ${#missing[@]} -eq 0 ]] || echo "missing here: ${missing[*]} (fine on a CPU machine; needed on the GPU machine)"
    for s in "${STEPS[@]}"; do
      if [[ ${STATE[$s]} == pending ]]; then
        printf 'would run [%s] (limit %s s): %s\n' "$s" "${LIMIT[$s]}" "${WHAT[$s]}"
      else
        printf 'would not run [%s]: %s\n' "$s" "${STATE[$s]}"
      fi
    done
    echo "would write: $OUT/report.md, $OUT/report.json (before and after every step) and each step's log; PyTorch snapshots: not part of the kit; record them with tools/pytorch_snapshot.py (traces/pytorch/README.md)"
    return 0
  fi
  [[ ${#missing[@]} -eq 0 ]] || die "missing: ${missing[*]}"
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
  export GPU_KIT_OUT=$OUT
  if [[ -n $RETRY && $RETRY != "$OUT" ]]; then
    # The kept steps' logs (and the comparison's JSON), so that OUT holds the whole report.
    for s in "${STEPS[@]}"; do
      [[ ${STATE[$s]} == "ok (earlier call)" ]] || continue
      cp "$RETRY/$s.log" "$OUT/" 2>/dev/null || true
      [[ $s == comparison ]] && { cp "$RETRY"/memgrad.json "$RETRY"/pytorch.json "$OUT/" 2>/dev/null || true; }
    done
  fi
  trap 'on_signal TERM 143' TERM
  trap 'on_signal INT 130' INT
  trap 'on_signal HUP 129' HUP
  write_report
  for s in "${STEPS[@]}"; do
    [[ ${STATE[$s]} == pending ]] && run_step "$s"
  done
  trap - TERM INT HUP
  write_report 1
  for s in "${STEPS[@]}"; do [[ ${STATE[$s]} == ok* || ${STATE[$s]} == "not run (--only)" ]] || return 1; done
}

SELF="$ROOT/tools/$(basename "${BASH_SOURCE[0]}")"
case "${1:-}" in
  pack) shift; cmd_pack "$@" ;;
  check) shift; cmd_check "$@" ;;
  run) shift; cmd_run "$@" ;;
  _step)
    [[ " ${STEPS[*]} " == *" ${2:-} "* ]] || die "_step: unknown step '${2:-}'"
    "step_$2" ;;
  *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2 ;;
esac
