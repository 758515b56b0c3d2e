#!/usr/bin/env python3
"""Runs memgrad's benchmark programs (`./memgrad bench [NAME...]`), next to their libtorch peers.

Each benchmark is a program in the build directory that prints `name: value unit` lines
(bench/bench_util.h). A benchmark with peers (libtorch programs printing the same names) is run
`--repeats` times, each side going first in turn, each run in its own process; the runner
reports, per figure, the median over runs of each side, the ratio memgrad/peer for each peer and
one PASS/FAIL line per target and peer. A benchmark without a peer (alloc, lab, dist) is run once
and its output streamed.

The peers are two libtorch releases (--peer chooses; both by default):
  libtorch-1.13  Debian's libtorch-dev, the programs bench/*_peer, in their best configuration
                 on the development machines (docs/performance.md):
                   LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp   OpenMP OpenBLAS
                   OPENBLAS_CORETYPE=SkylakeX   only when OpenBLAS does not pick an AVX-512
                                                kernel on an AVX-512 CPU
  libtorch-2.x   PyTorch 2.x's, from the torch wheel on PyPI (tools/torch_peer.py), the same
                 sources built as bench/*_peer_torch2: MKL and its own libgomp, as pip users
                 run it
Both run with GLIBC_TUNABLES=glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=
134217728 and set 2 threads themselves. memgrad runs in the runner's own environment
(./memgrad sets OPENBLAS_CORETYPE on AMD AVX-512 CPUs only).

To add a benchmark, append a Benchmark to BENCHMARKS: its name (what users type), its program
under the build directory, what it measures (--list), the arguments that make it quick, and
optionally its peer program and its targets.

usage: run_bench.py [--build-dir DIR] [--list] [--quick] [--repeats N] [--peer both|1.13|2]
                    [--no-peer] [NAME...]
Exits non-zero when a selected memgrad program is not built or fails, when a compared
benchmark's peer is missing (it says why; --no-peer runs memgrad's side alone, on purpose), and
when a target fails or has no figure to check.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
from typing import NamedTuple, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_peer  # noqa: E402  (the pinned PyTorch 2.x release of the second peer)

OPENBLAS_OPENMP_DIR = "/usr/lib/x86_64-linux-gnu/openblas-openmp"
PEER_TUNABLES = "glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=134217728"
AVX512_CORES = ("skylakex", "cooperlake", "sapphirerapids")  # OpenBLAS core names

# Figures printed for each side without a ratio: the loss after the last step is a sanity check
# (it falls from about 2.3), not a comparison; on random labels it is seed and BLAS-kernel noise
# (one binary gives 0.305, 0.112 and 0.359 under three OpenBLAS kernels), and the two libraries
# start from different initial weights. The comparison that means something is the same-start
# run's (bench/same_start.h): both sides train from the same weights on the same batches.
NOT_COMPARED = ("_final_loss",)
# The same-start run's figures (bench/same_start.h), each compared within SAME_START_TOLERANCE
# and printed to 9 significant digits instead of 4: the two sides agree far beyond 4.
PRECISE = ("_same_start_loss_first", "_same_start_loss_last", "_same_start_weight_norm")
# How far the same-start figures may differ, relative. Float32 sums in other orders (OpenBLAS's
# kernels against MKL's, other thread counts) moved the losses by 1.1e-7 at most and the weight
# norm by 3e-8 on the development machine; a peer that differed from memgrad by GELU's form, a
# weight decay of 0, AdamW's eps (1e-7 for 1e-8) or a layer norm's eps (1e-6 for 1e-5) moved the
# last loss by 4.3e-6 to 8e-5 and the weight norm by 2.1e-6 to 5.9e-4 (docs/performance.md).
SAME_START_TOLERANCE = 1e-6

METRIC_LINE = re.compile(r"^([A-Za-z0-9_]+): (n/a|[-+0-9.eE]+|inf|nan)(?: (.*))?$")


class Target(NamedTuple):
    """A check on one figure: the ratio memgrad/libtorch ("<=" or ">=" a bound), or, with
    `relative_to`, memgrad's own figure against bound x another of its figures."""
    metric: str
    op: str  # "<=" or ">=", or "~=": the ratio within 1 +- bound
    bound: float
    relative_to: Optional[str] = None


def same_start_targets(prefix):
    """The same-start run's three figures (first and last loss, weight norm) against the peer's."""
    return tuple(Target(prefix + suffix, "~=", SAME_START_TOLERANCE) for suffix in PRECISE)


class Benchmark(NamedTuple):
    name: str
    program: str  # relative to the build directory
    description: str
    quick_args: tuple = ()
    peer: Optional[str] = None  # the libtorch peer program, relative to the build directory
    targets: tuple = ()
    # The peer is the same program in another build directory (a sibling of the build
    # directory), e.g. "build-cuda": its side is labelled with it instead of libtorch.
    peer_build: Optional[str] = None
    in_default_set: bool = True  # run by a plain `./memgrad bench`
    # A Python peer, relative to the repository, run with a Python that imports torch
    # (Debian's python3-torch): torch.distributed for dist.
    peer_script: Optional[str] = None


BENCHMARKS = [
    Benchmark("alloc", "bench/alloc_bench",
              "allocate+free pairs: caching and passthrough allocators vs malloc",
              ("--quick",)),
    Benchmark("lab", "lab/bench/lab_bench",
              "allocate or free, ns per request, for every allocator policy on the replayed "
              "MLP training-step trace (traces/mlp_step.json); the planned policy against "
              "caching on the three shipped traces (peak reserved / ideal, ns per request, "
              "fallbacks) with its targets",
              ("--quick",)),
    Benchmark("lab_scale", "lab/bench/lab_scale_bench",
              "the policy lab at scale: replay of a 10^6-event trace (events/s), its SVG "
              "timeline (bytes) and `lab plot` (s), import of a 100 MB snapshot pickle (s, "
              "peak memory / file size); `./memgrad bench lab` runs it with lab",
              ("--quick",)),
    Benchmark("io", "bench/io_bench",
              "safetensors: encode and decode a header of 200k entries (linear-time parsing)",
              ("--quick",)),
    Benchmark("startup", "bench/startup_bench",
              "resident memory at start and after a CPU training step, CPU build vs CUDA build "
              "(the CUDA libraries must not cost a CPU run anything); needs nvcc",
              ("--quick",), peer="bench/startup_bench", peer_build="build-cuda",
              targets=(Target("cpu_run_rss", ">=", 0.8),), in_default_set=False),
    Benchmark("ops", "bench/ops_bench",
              "per-op overhead (with and without autograd), 16M elementwise, SGEMM, softmax, "
              "backward of a 1000-op chain; vs libtorch",
              ("--quick",), peer="bench/ops_peer",
              targets=(Target("add_1elem_overhead", "<=", 0.5),
                       Target("add_inplace_1elem_overhead", "<=", 0.5),
                       Target("autograd_mul_add_1elem_overhead", "<=", 0.5),
                       Target("backward_chain_1000", "<=", 0.5),
                       Target("sgemm_1024x1024x1024", ">=", 0.95),
                       Target("sgemm_4096x512x512", ">=", 0.95))),
    Benchmark("dist", "bench/dist_bench",
              "data parallelism on CPU ranks (Gloo, loopback): all_reduce of 64 MiB on 2 ranks "
              "(GB/s), and the MLP training step in one process against DDP on 2 ranks "
              "(overlapped and blocking) and ZeRO-3 (blocking and overlapped); vs "
              "torch.distributed's DDP on the same Gloo; then each variant's same-start run, "
              "whose losses every side and variant must agree on",
              ("--quick",), peer_script="bench/peer/torch_dist_peer.py",
              targets=(Target("mlp_step_2rank_ddp_median", "<=", 0.9),
                       Target("ddp_2rank_scaling", ">=", 1.0),
                       Target("mlp_step_2rank_zero3_median", "<=", 1.5,
                              relative_to="mlp_step_2rank_ddp_median"),
                       Target("mlp_step_2rank_zero3_overlap_median", "<=", 1.5,
                              relative_to="mlp_step_2rank_ddp_median"),
                       # From the same start: torch's and memgrad's DDP train alike, as one
                       # process does, and ZeRO-3 as DDP.
                       Target("mlp_step_1rank_same_start_loss_last", "~=", SAME_START_TOLERANCE),
                       Target("mlp_step_2rank_ddp_same_start_loss_last", "~=",
                              SAME_START_TOLERANCE),
                       Target("mlp_step_2rank_ddp_same_start_loss_last", "~=",
                              SAME_START_TOLERANCE,
                              relative_to="mlp_step_1rank_same_start_loss_last"),
                       Target("mlp_step_2rank_zero3_same_start_loss_last", "~=",
                              SAME_START_TOLERANCE,
                              relative_to="mlp_step_2rank_ddp_same_start_loss_last"),
                       Target("mlp_step_2rank_zero3_overlap_same_start_loss_last", "~=",
                              SAME_START_TOLERANCE,
                              relative_to="mlp_step_2rank_ddp_same_start_loss_last"))),
    Benchmark("estimate", "bench/estimate_bench",
              "a GPT-2 XL-shaped AdamW step (width 1600, 25 heads, context 1024) on an 80 GiB "
              "meta device at 12, 24 and 48 blocks: time (s), exact peaks, host memory; no peer",
              ("--quick",)),
    Benchmark("train", "bench/train_bench",
              "MLP 784-512-512-10 training step (SGD, batch 128): step time, peak memory; "
              "vs libtorch; then 20 steps from the same weights and batches on both sides, "
              "whose losses and weight norm must agree",
              ("--quick",), peer="bench/train_peer",
              targets=(Target("train_step_median", "<=", 0.9),
                       Target("train_step_p90", "<=", 1.25, relative_to="train_step_median"),
                       Target("train_step_median", "<=", 1.15,
                              relative_to="train_step_fma_bound"),
                       Target("train_peak_rss", "<=", 0.3),
                       *same_start_targets("train"))),
    Benchmark("gemm_scaling", "bench/gemm_scaling_bench",
              "the MLP's and the transformer's matrix products against the FMA peak, on one "
              "thread, on two, and as two single-threaded streams at once: how much of the "
              "steps' distance to their FMA-peak bound is the GEMM library's and how much the "
              "machine's; no peer",
              ("--quick",)),
    Benchmark("train_charlm", "bench/train_charlm_bench",
              "train_charlm's transformer training step (2 blocks of width 128, 4 heads, "
              "context 64, AdamW, batch 32): step time, peak memory; vs libtorch; then its "
              "same-start run, as train's",
              ("--quick",), peer="bench/train_charlm_peer",
              targets=(Target("charlm_step_median", "<=", 0.7),
                       Target("charlm_step_p90", "<=", 1.25, relative_to="charlm_step_median"),
                       Target("charlm_peak_rss", "<=", 0.3),
                       *same_start_targets("charlm"))),
]


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="./memgrad bench", description="Run memgrad's benchmark programs.")
    parser.add_argument("--build-dir", default="build",
                        help="the Meson build directory (default: build)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument("--quick", action="store_true",
                        help="fewer iterations and one run per side, for a demo (noisier)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each side of a compared benchmark, alternating "
                             "(default: 3; the median over runs is reported)")
    parser.add_argument("--peer", choices=("both", "1.13", "2"), default="both",
                        help="the libtorch peers of compared benchmarks: Debian's 1.13, PyTorch "
                             "2.x's from PyPI (tools/torch_peer.py), or both (default)")
    parser.add_argument("--no-peer", action="store_true",
                        help="run memgrad's side of compared benchmarks alone (no ratios)")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="benchmarks to run (default: all)")
    return parser.parse_args(argv)


def select(names):
    """The benchmarks named (all when none), or exits with the list of known names."""
    if not names:
        return [b for b in BENCHMARKS if b.in_default_set]
    by_name = {b.name: b for b in BENCHMARKS}
    # "lab" names the lab's two benchmarks: per-request costs and scale.
    names = [m for n in names for m in (["lab", "lab_scale"] if n == "lab" else [n])]
    unknown = [n for n in names if n not in by_name]
    if unknown:
        known = ", ".join(by_name)
        sys.exit(f"run_bench: unknown benchmark {', '.join(map(repr, unknown))} (known: {known})")
    return [by_name[n] for n in names]


def load_average():
    try:
        return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        return "load average unknown"


def cpu_has_avx512():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return any(line.startswith("flags") and " avx512f" in line for line in f)
    except OSError:
        return False


def run_capture(cmd, env):
    """Runs cmd; returns (status, stdout lines). stderr passes through."""
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=False)
    return proc.returncode, proc.stdout.splitlines()


def blas_core(config_lines):
    """The OpenBLAS core name from a program's "config: BLAS ..., core NAME, ..." line."""
    for line in config_lines:
        m = re.search(r"core (\w+)", line)
        if line.startswith("config: BLAS") and m:
            return m.group(1)
    return None


class Peer(NamedTuple):
    """A libtorch a compared benchmark runs against: its label, its --peer key and the suffix of
    its programs' names (bench/ops_peer, bench/ops_peer_torch2)."""
    label: str
    key: str
    suffix: str


PEERS = (Peer("libtorch-1.13", "1.13", ""),  # Debian's libtorch-dev, OpenBLAS
         # PyPI's torch wheel, the release tools/torch_peer.py pins (and fetches again otherwise)
         Peer("libtorch-" + ".".join(torch_peer.TORCH.split(".")[:2]), "2", "_torch2"))


def peer_environment(peer_path, openblas):
    """The peer's best-configuration environment and a line saying what it is. `openblas`: the
    peer uses OpenBLAS (Debian's libtorch) rather than the MKL linked into PyPI's."""
    env = dict(os.environ)
    env["GLIBC_TUNABLES"] = PEER_TUNABLES
    if not openblas:
        return env, "MKL linked into libtorch_cpu.so, its own libgomp (rpath)"
    if os.path.isdir(OPENBLAS_OPENMP_DIR):
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (OPENBLAS_OPENMP_DIR, env.get("LD_LIBRARY_PATH")) if p)
    note = f"LD_LIBRARY_PATH={env.get('LD_LIBRARY_PATH', '')}; OpenBLAS core as detected"
    if "OPENBLAS_CORETYPE" in env:
        note = f"OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']} from the caller"
    elif cpu_has_avx512():
        _, lines = run_capture([peer_path, "--config"], env)
        core = blas_core(lines)
        if core is not None and core.lower() not in AVX512_CORES:
            env["OPENBLAS_CORETYPE"] = "SkylakeX"
            note = f"OpenBLAS detected {core} on an AVX-512 CPU: OPENBLAS_CORETYPE=SkylakeX"
        else:
            note = f"OpenBLAS detected {core}, an AVX-512 kernel: no override"
    return env, note


def parse_metrics(lines):
    """{name: (value or None for n/a, unit)} and the config lines, from a program's output."""
    metrics, config = {}, []
    for line in lines:
        if line.startswith("config:"):
            config.append(line)
            continue
        m = METRIC_LINE.match(line.strip())
        if m:
            value = None if m.group(2) == "n/a" else float(m.group(2))
            metrics[m.group(1)] = (value, (m.group(3) or "").strip())
    return metrics, config


class Side:
    """One implementation of a compared benchmark: its command, environment and runs."""

    def __init__(self, label, cmd, env):
        self.label, self.cmd, self.env = label, cmd, env
        self.runs = []  # one {name: (value, unit)} per run
        self.config = []
        self.loads = []

    def run_once(self):
        self.loads.append(load_average())
        status, lines = run_capture(self.cmd, self.env)
        if status != 0:
            print("\n".join(lines), flush=True)
            return status
        metrics, config = parse_metrics(lines)
        self.runs.append(metrics)
        if not self.config:
            self.config = config
        return 0

    def names(self):
        return list(self.runs[0]) if self.runs else []

    def values(self, name):
        return [r[name][0] for r in self.runs if name in r and r[name][0] is not None]

    def median(self, name):
        vals = self.values(name)
        return statistics.median(vals) if vals else None

    def unit(self, name):
        return self.runs[0][name][1] if self.runs and name in self.runs[0] else ""


def fmt(x, digits=4):
    if x is None:
        return "n/a"
    return f"{x:.{digits}g}"


def print_figures(ours, peers):
    for name in ours.names():
        digits = 9 if name.endswith(PRECISE) else 4
        for side in (ours, *peers):
            vals = side.values(name)
            runs = " ".join(fmt(v, digits) for v in vals)
            print(f"{name} {side.label}: {fmt(side.median(name), digits)} {side.unit(name)} "
                  f"({len(side.runs)} runs: {runs or 'n/a'})")
        for peer in peers if not name.endswith(NOT_COMPARED) else ():
            a, b = ours.median(name), peer.median(name)
            ratio = fmt(a / b, digits) if a is not None and b else "n/a"
            print(f"{name} ratio {ours.label}/{peer.label}: {ratio}")


def check_targets(bench, ours, peers):
    """Prints one PASS/FAIL line per target and peer (a target on memgrad's own figures once);
    returns the number that did not pass."""
    failed = 0
    for t in bench.targets:
        checks = []
        if t.relative_to:
            ref = ours.median(t.relative_to)
            a = ours.median(t.metric)
            bound = f"(1 +- {t.bound})" if t.op == "~=" else t.bound
            checks.append((f"memgrad {t.metric} {t.op} {bound} x memgrad {t.relative_to}",
                           a / ref if a is not None and ref else None))
        else:
            for peer in peers:
                a, b = ours.median(t.metric), peer.median(t.metric)
                bound = f"1 +- {t.bound}" if t.op == "~=" else t.bound
                checks.append((f"{t.metric} ratio {ours.label}/{peer.label} {t.op} {bound}",
                               a / b if a is not None and b else None))
        for what, value in checks:
            if value is None:
                print(f"target {what}: FAIL (no figure)")
                failed += 1
                continue
            if t.op == "~=":
                ok = abs(value - 1.0) <= t.bound
                shown = f"{value:.9g}"
            else:
                ok = value <= t.bound if t.op == "<=" else value >= t.bound
                shown = f"{value:.3g}"
            print(f"target {what}: {'PASS' if ok else 'FAIL'} ({shown})")
            failed += 0 if ok else 1
    return failed


def torch_interpreter():
    """A Python that imports torch.distributed: this one, else Debian's, else None."""
    for exe in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
        if os.access(exe, os.X_OK) and subprocess.run(
                [exe, "-c", "import torch.distributed"], capture_output=True,
                check=False).returncode == 0:
            return exe
    return None


def script_peer_side(bench, args):
    """The Side of a Python peer, or None after saying why it cannot run."""
    exe = torch_interpreter()
    if exe is None:
        print(f"run_bench: error: peer torch.distributed missing: no Python here imports torch, "
              f"so {bench.peer_script} cannot run (`./memgrad bench` installs Debian's "
              f"python3-torch); `--no-peer` runs memgrad's side alone.", file=sys.stderr,
              flush=True)
        return None
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          bench.peer_script)
    _, lines = run_capture([exe, script, "--config"], dict(os.environ))
    version = next((line.split()[2].rstrip(",") for line in lines
                    if line.startswith("config: torch.distributed")), "?")
    print(f"peer torch.distributed {version}: {exe}; 1 thread per rank "
          f"(torch.set_num_threads)", flush=True)
    return Side(f"torch-{'.'.join(version.split('.')[:2])}", [exe, script, *args],
                dict(os.environ))


def peer_sides(bench, build_dir, which, args):
    """The Sides of the libtorch peers `which` (--peer) selects, run with `args`, or None after
    saying which is missing."""
    sides = []
    for peer in PEERS:
        if which not in (peer.key, "both"):
            continue
        path = os.path.join(build_dir, bench.peer + peer.suffix)
        if not os.access(path, os.X_OK):
            how = ("`./memgrad bench` installs libtorch-dev and configures the build again"
                   if peer.key == "1.13" else
                   "`./memgrad bench` fetches it from PyPI (tools/torch_peer.py) and configures "
                   "the build again")
            print(f"run_bench: error: peer {peer.label} missing: {path} is not built, so no "
                  f"ratio against it can be measured. {how}; `--peer` chooses the peers, "
                  f"`--no-peer` runs memgrad's side alone.", file=sys.stderr, flush=True)
            return None
        env, note = peer_environment(path, openblas=peer.key == "1.13")
        print(f"peer {peer.label}: GLIBC_TUNABLES={env['GLIBC_TUNABLES']}; {note}; 2 threads "
              f"(torch::set_num_threads)", flush=True)
        sides.append(Side(peer.label, [path, *args], env))
    return sides


def run_compared(bench, build_dir, args):
    """Runs a benchmark and its peers in rotating order; prints figures, ratios and targets.
    Returns non-zero when a run fails, a peer is missing (unless --no-peer) or a target fails."""
    path = os.path.join(build_dir, bench.program)
    extra = list(bench.quick_args if args.quick else ())
    peers = []
    if bench.peer_build:
        # The same program in a sibling build directory: "build" against "build-cuda".
        ours = Side(os.path.basename(os.path.abspath(build_dir)), [path, *extra], dict(os.environ))
        peer_dir = os.path.join(os.path.dirname(os.path.abspath(build_dir)), bench.peer_build)
        peer_path = os.path.join(peer_dir, bench.peer)
        if not args.no_peer:
            if not os.access(peer_path, os.X_OK):
                print(f"run_bench: error: {peer_path} is not built, so the {bench.peer_build} "
                      f"side cannot be measured (`./memgrad bench {bench.name}` builds it where "
                      f"nvcc exists); `--no-peer` runs this build's side alone.", file=sys.stderr,
                      flush=True)
                return 1
            peers = [Side(bench.peer_build, [peer_path, *extra], dict(os.environ))]
    else:
        ours = Side("memgrad", [path, *extra], dict(os.environ))
        if not args.no_peer and bench.peer_script:
            side = script_peer_side(bench, extra)
            if side is None:
                return 1
            peers = [side]
        elif not args.no_peer:
            peers = peer_sides(bench, build_dir, args.peer, extra)
            if peers is None:
                return 1
    if args.no_peer:
        print("--no-peer: running memgrad's side only, no ratios and no targets", flush=True)
    order = [ours, *peers]
    for r in range(1 if args.quick else max(1, args.repeats)):
        # Each side goes first in turn, so none always runs on a machine the others warmed.
        for side in order[r % len(order):] + order[:r % len(order)]:
            status = side.run_once()
            if status != 0:
                print(f"run_bench: error: {' '.join(side.cmd)} exited with status {status}",
                      file=sys.stderr, flush=True)
                return status
    for side in order:
        for line in side.config:
            print(f"{side.label} {line}")
        print(f"{side.label} runs started at: {'; '.join(side.loads)}")
    for peer in peers:
        core = blas_core(peer.config)
        if core is not None and blas_core(ours.config) != core:
            print(f"warning: the OpenBLAS cores differ (memgrad {blas_core(ours.config)}, "
                  f"{peer.label} {core}): GEMM figures compare kernels, not libraries")
    print_figures(ours, peers)
    failed = check_targets(bench, ours, peers) if peers else 0
    sys.stdout.flush()
    return 1 if failed else 0


def run(bench, build_dir, args):
    """Runs one benchmark (and its peer, if it has one); returns the exit status."""
    path = os.path.join(build_dir, bench.program)
    if not os.access(path, os.X_OK):
        print(f"run_bench: error: benchmark '{bench.name}' is not built: {path} does not exist. "
              f"Build it with `./memgrad build` (or `ninja -C {build_dir}`; Meson option "
              f"-Dbench=true).", file=sys.stderr, flush=True)
        return 1
    print(f"== {bench.name}: {path} ({load_average()})", flush=True)
    if bench.peer or bench.peer_script:
        return run_compared(bench, build_dir, args)
    cmd = [path, *(bench.quick_args if args.quick else ())]
    status = subprocess.run(cmd, check=False).returncode
    if status != 0:
        print(f"run_bench: error: benchmark '{bench.name}' exited with status {status}",
              file=sys.stderr, flush=True)
    return status


def main(argv):
    args = parse_args(argv)
    if args.list:
        width = max(len(b.name) for b in BENCHMARKS)
        for b in BENCHMARKS:
            peer = f", peer {b.peer}" if b.peer else ""
            print(f"{b.name:<{width}}  {b.description}  ({b.program}{peer})")
        return 0
    failed = [b.name for b in select(args.names)
              if run(b, args.build_dir, args) != 0]
    if failed:
        print(f"run_bench: {len(failed)} benchmark(s) failed: {', '.join(failed)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
