#!/usr/bin/env python3
"""The build benchmark (`./memgrad bench build`): a cold build of `./memgrad test`'s targets.

usage: build_bench.py [--against REV] [--rev REV] [--keep DIR]

Clones the repository at REV (default HEAD) into a temporary folder, configures it as
`./memgrad test` does (build/, -Dcuda=disabled) and builds the targets of `./memgrad test` with
ninja -jN on N cores, ccache off, timing it. Prints `name: value unit` lines:

  build_wall          seconds from the first compile to the last link
  build_cpu           CPU seconds (user + system) of every compiler and linker process
  build_steps         compile and link commands run
  build_tu_max        seconds of the slowest translation unit, named after it

then the ten slowest translation units (from ninja's .ninja_log), and its targets:

  build_tu_max <= 40 s                 no single translation unit holds the build back on 2 cores
  build_cpu <= 0.6 x REV's build_cpu   with --against REV: the same build of REV, cold, in the same
                                       run, one after the other (the same machine and load)

Exits 1 when a target fails or a build fails. With --keep DIR the clones stay in DIR.
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slowest_units  # noqa: E402  (reads .ninja_log: the seconds of each command)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_TU_SECONDS = 40.0
CPU_RATIO = 0.6  # at least 40% fewer compile CPU-seconds than the revision --against names


def run(cmd, cwd=None, env=None, quiet=True):
    proc = subprocess.run(cmd, cwd=cwd, env=env, text=True, check=False,
                          stdout=subprocess.PIPE if quiet else None,
                          stderr=subprocess.STDOUT if quiet else None)
    if proc.returncode != 0:
        if quiet:
            sys.stdout.write(proc.stdout[-4000:])
        sys.exit(f"build_bench: {' '.join(cmd)} failed ({proc.returncode})")
    return proc.stdout if quiet else ""


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cold_build(rev, workdir):
    """Clones `rev`, configures and builds `./memgrad test`'s targets; returns the figures."""
    commit = run(["git", "-C", ROOT, "rev-parse", "--verify", f"{rev}^{{commit}}"]).strip()
    clone = os.path.join(workdir, commit[:12])
    shutil.rmtree(clone, ignore_errors=True)  # a clone left by an earlier --keep run
    run(["git", "clone", "--quiet", "--no-hardlinks", ROOT, clone])
    run(["git", "-C", clone, "checkout", "--quiet", commit])
    env = dict(os.environ, CCACHE_DISABLE="1")
    build = os.path.join(clone, "build")
    run(["meson", "setup", build, "-Dcuda=disabled"], cwd=clone, env=env)
    targets = run([sys.executable, os.path.join(clone, "tools", "build_targets.py"), build,
                   "test"], env=env).split()
    cpu_before = children_cpu()
    start = time.monotonic()
    run(["ninja", "-C", build, f"-j{os.cpu_count()}"] + targets, env=env)
    wall = time.monotonic() - start
    cpu = children_cpu() - cpu_before
    steps = sorted(((s, o) for o, s in slowest_units.steps(build).items()), reverse=True)
    units = [(s, o) for s, o in steps if o.endswith(".o")]
    return {"wall": wall, "cpu": cpu, "steps": len(steps), "units": units}


def report(figures, label):
    units = figures["units"]
    top_seconds, top_unit = units[0] if units else (0.0, "-")
    print(f"build_wall: {figures['wall']:.1f} s{label}")
    print(f"build_cpu: {figures['cpu']:.1f} s{label}")
    print(f"build_steps: {figures['steps']}{label}")
    print(f"build_translation_units: {len(units)}{label}")
    print(f"build_tu_max: {top_seconds:.1f} s ({top_unit}){label}")
    print(f"the ten slowest translation units{label}:")
    for seconds, output in units[:10]:
        print(f"  {seconds:7.1f} s  {output}")


def main(argv):
    parser = argparse.ArgumentParser(prog="./memgrad bench build", description=__doc__.split("\n")[0])
    parser.add_argument("--rev", default="HEAD", help="the revision to build (default HEAD)")
    parser.add_argument("--against", help="a revision built the same way in the same run")
    parser.add_argument("--keep", help="keep the clones in this folder")
    opts = parser.parse_args(argv)
    workdir = opts.keep or tempfile.mkdtemp(prefix="memgrad-build-bench-")
    os.makedirs(workdir, exist_ok=True)
    print(f"config: {os.cpu_count()} cores, ninja -j{os.cpu_count()} (one command per core, so a "
          f"unit's seconds are its own), ccache off; "
          f"clones in {workdir}")
    try:
        figures = cold_build(opts.rev, workdir)
        report(figures, "")
        ok = True
        top = figures["units"][0][0] if figures["units"] else 0.0
        verdict = "PASS" if top <= MAX_TU_SECONDS else "FAIL"
        ok = ok and verdict == "PASS"
        print(f"target build_tu_max <= {MAX_TU_SECONDS:.0f} s: {top:.1f} s {verdict}")
        if opts.against:
            peer = cold_build(opts.against, workdir)
            report(peer, f" [{opts.against}]")
            ratio = figures["cpu"] / peer["cpu"]
            print(f"build_cpu_ratio: {ratio:.3f} (this tree / {opts.against})")
            print(f"build_wall_ratio: {figures['wall'] / peer['wall']:.3f} (this tree / "
                  f"{opts.against})")
            verdict = "PASS" if ratio <= CPU_RATIO else "FAIL"
            ok = ok and verdict == "PASS"
            print(f"target build_cpu <= {CPU_RATIO} x {opts.against}'s: {ratio:.3f} {verdict}")
        return 0 if ok else 1
    finally:
        if not opts.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
