#!/usr/bin/env python3
"""Starts N ranks of a program on this machine, as torchrun does: `./memgrad launch -n N [--] PROGRAM ARGS`.

Each rank gets torchrun's environment: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, and
MEMGRAD_STORE_PATH, a fresh folder for Gloo's file store (removed at the end), unless --store
names one. OMP_NUM_THREADS is set to 1 for every rank unless it is set already (N ranks share the
cores; torchrun does the same). PROGRAM is a path or command, or the name of a memgrad example
(`train_mlp`, `b22`), which is looked up in the build directory.

Every line a rank prints (stdout and stderr) is printed with its rank in front: "[rank 1] ...",
as the rank prints it (ranks run under coreutils' `stdbuf -oL -eL`, so C stdio sends each line
at once instead of a block at exit). Impossible requests are refused before any rank starts: a
--store folder that cannot be made, more ranks than the open-file limit lets connect to each
other.
When a rank exits with a non-zero status (or dies of a signal), the launcher says which, stops the
others (SIGTERM to each rank's process group, SIGKILL after --grace seconds) and exits with that
rank's status (128 + the signal for a signal). The rank named is the one that failed first: a rank
whose collective failed because peers had exited says so in its MEMGRAD_ERROR_FILE
(distributed/failure_note.h), and the launcher names the peer instead, however close
together the processes ended. The ranks' own timeouts (MEMGRAD_DIST_TIMEOUT)
make them fail when a peer dies without the launcher noticing, on another host.

Several hosts: run one process per rank there yourself (or with a scheduler) with RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT (a redis-server every host reaches) and
GLOO_SOCKET_IFNAME; README.md, "Training on several processes", says how.
"""
import argparse
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_example import find_examples, resolve_name  # noqa: E402


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="./memgrad launch", description=__doc__.splitlines()[0],
        epilog="Everything after the program (or after --) is passed to it.")
    parser.add_argument("-n", "--nproc", type=int, required=True, metavar="N",
                        help="number of ranks to start on this machine")
    parser.add_argument("--build-dir", default="build",
                        help="where example names are looked up (default: build)")
    parser.add_argument("--store", help="the file store's folder (default: a fresh temporary one)")
    parser.add_argument("--grace", type=float, default=5.0,
                        help="seconds between SIGTERM and SIGKILL when stopping ranks (default 5)")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="PROGRAM ARGS")
    opts = parser.parse_args(argv)
    if opts.command and opts.command[0] == "--":
        opts.command = opts.command[1:]
    if not opts.command:
        parser.error("no program to launch")
    if not 1 <= opts.nproc <= 1024:
        parser.error(f"-n {opts.nproc}: the number of ranks must be in [1, 1024]")
    # Each rank of a Gloo group keeps a connection to every other, and the launcher a pipe to
    # each rank: about N + 64 open files per process. Refused now rather than at the rendezvous.
    files, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if files != resource.RLIM_INFINITY and opts.nproc + 64 > files:
        parser.error(f"-n {opts.nproc}: each rank would keep about {opts.nproc + 64} files open "
                     f"(a connection to every other rank), more than this machine's limit of "
                     f"{files} (ulimit -n)")
    return opts


def resolve_program(command, build_dir):
    """The command with an example name replaced by its path in the build directory."""
    program = command[0]
    if os.sep in program or shutil.which(program):
        return command
    examples = find_examples(build_dir)
    name = resolve_name(examples, program)
    if name is None:
        raise SystemExit(f"launch: '{program}' is neither a program nor a built example "
                         f"(./memgrad example list shows them)")
    return [examples[name]] + command[1:]


class Printer:
    """Prints lines of several ranks without interleaving within a line."""

    def __init__(self):
        self.lock = threading.Lock()

    def line(self, text):
        with self.lock:
            sys.stdout.write(text)
            sys.stdout.flush()

    def forward(self, rank, stream):
        for raw in iter(stream.readline, b""):
            self.line(f"[rank {rank}] " + raw.decode("utf-8", "replace").rstrip("\n") + "\n")
        stream.close()


def rank_env(rank, world, store, error_file):
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
               LOCAL_WORLD_SIZE=str(world), MEMGRAD_STORE_PATH=store,
               MEMGRAD_ERROR_FILE=error_file)
    env.setdefault("OMP_NUM_THREADS", "1")
    # stdbuf works by preloading libstdbuf.so; a program built with AddressSanitizer refuses to
    # start unless ASan's runtime comes first, though libstdbuf replaces no allocation function.
    if "verify_asan_link_order" not in env.get("ASAN_OPTIONS", ""):
        env["ASAN_OPTIONS"] = ":".join(
            filter(None, [env.get("ASAN_OPTIONS", ""), "verify_asan_link_order=0"]))
    return env


def gone_in_note(path):
    """The ranks a rank's failure note names as exited before it failed ([] without a note)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            words = f.readline().split()
    except OSError:
        return []
    if not words or words[0] != "gone":
        return []
    return [int(w) for w in words[1:] if w.isdigit()]


def reap(p, timeout):
    """p's returncode, waiting up to timeout seconds for it to end (None if it has not)."""
    deadline = time.monotonic() + timeout
    while p.returncode is None:
        pid, status = os.waitpid(p.pid, os.WNOHANG)
        if pid == p.pid:
            p.returncode = (-os.WTERMSIG(status) if os.WIFSIGNALED(status)
                            else os.WEXITSTATUS(status))
        elif time.monotonic() >= deadline:
            break
        else:
            time.sleep(0.01)
    return p.returncode


def root_failure(rank, procs, error_file, grace):
    """The rank that failed first: from `rank`, follows each failure note to the first rank it
    names whose own status is non-zero (a rank found exited has, or is a moment from, ended)."""
    for _ in procs:
        cause = next((g for g in gone_in_note(error_file(rank))
                      if g != rank and 0 <= g < len(procs)
                      and reap(procs[g], grace) not in (None, 0)), None)
        if cause is None:
            break
        rank = cause
    return rank


def stop(procs, grace):
    """SIGTERM to every running rank's process group, SIGKILL to those still there after grace."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def status_of(code):
    """A shell's exit status for a returncode (negative: killed by a signal)."""
    return 128 - code if code < 0 else code


def describe(code):
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with status {code}"


def launch(opts):
    command = resolve_program(opts.command, opts.build_dir)
    # Each rank writes into a pipe, where C stdio buffers whole blocks: no line would appear
    # until a rank exits, stderr would overtake earlier stdout, and a rank stopped after a peer
    # failed would lose what it printed. coreutils' stdbuf makes stdout and stderr line-buffered.
    stdbuf = shutil.which("stdbuf")
    if stdbuf:
        command = [stdbuf, "-oL", "-eL"] + command
    store = opts.store or tempfile.mkdtemp(prefix="memgrad-launch-")
    try:
        os.makedirs(store, exist_ok=True)
    except OSError as e:
        raise SystemExit(f"launch: --store {store}: cannot make the folder ({e.strerror})")
    notes = tempfile.mkdtemp(prefix="memgrad-launch-errors-")

    def error_file(rank):
        return os.path.join(notes, f"rank-{rank}.error")

    printer = Printer()
    if "OMP_NUM_THREADS" not in os.environ and opts.nproc > 1:
        printer.line(f"[launch] OMP_NUM_THREADS=1 for each of the {opts.nproc} ranks "
                     f"(set it to choose another value)\n")
    procs, readers = [], []
    try:
        for rank in range(opts.nproc):
            try:
                p = subprocess.Popen(command, env=rank_env(rank, opts.nproc, store, error_file(rank)),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
            except OSError as e:
                stop(procs, opts.grace)
                raise SystemExit(f"launch: cannot start {command[0]}: {e}")
            procs.append(p)
            t = threading.Thread(target=printer.forward, args=(rank, p.stdout), daemon=True)
            t.start()
            readers.append(t)

        def on_signal(signum, _frame):
            printer.line(f"[launch] {signal.Signals(signum).name}: stopping every rank\n")
            stop(procs, opts.grace)
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)

        # Reap the ranks in the order they end (os.waitpid on any child), so the rank named is
        # the one that failed first, not the lowest-numbered of several that failed since.
        by_pid = {p.pid: rank for rank, p in enumerate(procs)}
        failed = None
        while failed is None and any(p.returncode is None for p in procs):
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            if pid not in by_pid:
                continue
            p = procs[by_pid[pid]]
            p.returncode = (-os.WTERMSIG(status) if os.WIFSIGNALED(status)
                            else os.WEXITSTATUS(status))
            if p.returncode != 0:
                failed = (by_pid[pid], p.returncode)
        if failed is not None:
            reaped_first = failed[0]
            rank = root_failure(reaped_first, procs, error_file, opts.grace)
            failed = (rank, procs[rank].returncode)
            others = [r for r, p in enumerate(procs) if p.poll() is None]
            printer.line(f"[launch] rank {rank} {describe(failed[1])}"
                         + (f" (rank {reaped_first} failed after it, finding it gone)"
                            if rank != reaped_first else "")
                         + (f"; stopping ranks {', '.join(map(str, others))}" if others else "")
                         + "\n")
            stop(procs, opts.grace)
        for t in readers:
            t.join(timeout=2)
        return status_of(failed[1]) if failed is not None else 0
    finally:
        if opts.store is None:
            shutil.rmtree(store, ignore_errors=True)
        shutil.rmtree(notes, ignore_errors=True)


def main(argv=None):
    return launch(parse_args(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
