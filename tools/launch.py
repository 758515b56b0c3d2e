#!/usr/bin/env python3
"""Starts N ranks of a program on this machine, as torchrun does: `./memgrad launch -n N [--] PROGRAM ARGS`.

Each rank gets torchrun's environment: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, and
MEMGRAD_STORE_PATH, a fresh folder for Gloo's file store (removed at the end), unless --store
names one. OMP_NUM_THREADS is set to 1 for every rank unless it is set already (N ranks share the
cores; torchrun does the same). PROGRAM is a path or command, or the name of a memgrad example
(`train_mlp`, `b22`), which is looked up in the build directory.

Every line a rank prints (stdout and stderr) is printed with its rank in front: "[rank 1] ...",
as the rank prints it (ranks run under coreutils' `stdbuf -oL -eL`, so C stdio sends each line
at once instead of a block at exit), and a progress bar's redraws as they come
(MEMGRAD_PROGRESS=live: in place on a terminal, a line a second otherwise). Impossible requests
are refused before any rank starts: a --store folder that cannot be made, more ranks than the
open-file limit lets connect to each other, or than the ephemeral ports Gloo's pairs listen on
(N (N - 1) of them: 168 ranks with Linux's default range).
When a rank exits with a non-zero status (or dies of a signal), the launcher says which, stops the
others (SIGTERM to each rank's process group, SIGKILL after --grace seconds) and exits with that
rank's status (128 + the signal for a signal). The rank named is the one that failed first: a rank
whose collective failed because peers had exited says so in its MEMGRAD_ERROR_FILE
(distributed/failure_note.h), and the launcher names the peer instead, however close
together the processes ended. The ranks' own timeouts (MEMGRAD_DIST_TIMEOUT)
make them fail when a peer dies without the launcher noticing, on another host. When a rank's
collective times out with every peer alive, the ranks still running a moment later never reached
it: the launcher names them (and what they are doing: sleeping, stopped by a signal, ...) as stuck.

Several hosts: run one process per rank there yourself (or with a scheduler) with RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT (a redis-server every host reaches) and
GLOO_SOCKET_IFNAME; README.md, "Training on several processes", says how.
"""
import argparse
import codecs
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
    # Gloo's TCP transport (Debian's) listens on a port of its own for each pair it connects: N
    # ranks on one host hold N (N - 1) ports at once, all from the kernel's ephemeral range. Past
    # it, ranks fail in the rendezvous ("bind: Address already in use").
    low, high = ephemeral_port_range()
    if opts.nproc * (opts.nproc - 1) > high - low + 1:
        parser.error(f"-n {opts.nproc}: Gloo's ranks would listen on {opts.nproc * (opts.nproc - 1)} "
                     f"ports (one per ordered pair of ranks), more than the {high - low + 1} "
                     f"ephemeral ports of this machine (net.ipv4.ip_local_port_range {low}-{high})")
    return opts


def ephemeral_port_range():
    """The kernel's range of ports for programs that bind to port 0 (Linux's default if unread)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            low, high = map(int, f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


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
    """Prints lines of several ranks without interleaving within a line, and the progress lines
    ranks redraw in place ("\\r" and the new text, as a training program's bar does with
    MEMGRAD_PROGRESS=live): on a terminal redrawn in place too; in a pipe or a file, at most one
    a second per rank, each as a line of its own."""

    THROTTLE = 1.0  # seconds between a rank's progress lines when launch's output is no terminal

    def __init__(self):
        self.lock = threading.Lock()
        self.tty = sys.stdout.isatty()
        self.drawn = None  # on a terminal: the rank whose progress line is drawn, unfinished

    def line(self, text):
        with self.lock:
            if self.drawn is not None:  # finish the progress line before another line
                sys.stdout.write("\n")
                self.drawn = None
            sys.stdout.write(text)
            sys.stdout.flush()

    def progress(self, rank, text, last_shown):
        """Shows rank's redrawn line; returns when it was last shown (for the throttle)."""
        now = time.monotonic()
        if self.tty:
            with self.lock:
                if self.drawn not in (None, rank):
                    sys.stdout.write("\n")
                sys.stdout.write(f"\r[rank {rank}] {text}\033[K")
                sys.stdout.flush()
                self.drawn = rank
            return now
        if last_shown is not None and now - last_shown < self.THROTTLE:
            return last_shown
        self.line(f"[rank {rank}] {text}\n")
        return now

    def finish_progress(self, rank, text):
        """Ends rank's redrawn line with its last text: in place on a terminal."""
        with self.lock:
            if self.drawn is not None and self.drawn != rank:
                sys.stdout.write("\n")
            sys.stdout.write(f"\r[rank {rank}] {text}\033[K\n" if self.tty
                             else f"[rank {rank}] {text}\n")
            sys.stdout.flush()
            self.drawn = None

    def forward(self, rank, stream):
        """Copies rank's output as it comes: lines whole, redraws as progress."""
        pending = ""      # text after the last line end or redraw
        redrawing = False  # whether `pending` follows a "\r" (a redraw not yet ended)
        shown = None
        decoder = codecs.getincrementaldecoder("utf-8")("replace")  # a character may span reads
        fd = stream.fileno()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            pending += decoder.decode(chunk)
            while True:
                cut = min((i for i in (pending.find("\n"), pending.find("\r")) if i >= 0),
                          default=-1)
                if cut < 0:
                    break
                text, end, pending = pending[:cut], pending[cut], pending[cut + 1:]
                if end == "\n":
                    if redrawing:  # the redrawn line's last state, ended
                        self.finish_progress(rank, text)
                    else:
                        self.line(f"[rank {rank}] {text}\n")
                    redrawing = False
                else:  # a redraw starts here; the text before it was a line's start or a redraw
                    if text and not redrawing:
                        self.line(f"[rank {rank}] {text}\n")
                    redrawing = True
            if redrawing and pending:
                shown = self.progress(rank, pending, shown)
        if pending:
            self.line(f"[rank {rank}] {pending}\n")
        stream.close()


def rank_env(rank, world, store, error_file):
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
               LOCAL_WORLD_SIZE=str(world), MEMGRAD_STORE_PATH=store,
               MEMGRAD_ERROR_FILE=error_file)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("MEMGRAD_PROGRESS", "live")  # progress bars redraw though stdout is a pipe
    # stdbuf works by preloading libstdbuf.so; a program built with AddressSanitizer refuses to
    # start unless ASan's runtime comes first, though libstdbuf replaces no allocation function.
    if "verify_asan_link_order" not in env.get("ASAN_OPTIONS", ""):
        env["ASAN_OPTIONS"] = ":".join(
            filter(None, [env.get("ASAN_OPTIONS", ""), "verify_asan_link_order=0"]))
    return env


def read_note(path):
    """The ranks a rank's failure note names as exited before it failed: None without a note,
    [] when its collective timed out with every peer alive (distributed/failure_note.h)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            words = f.readline().split()
    except OSError:
        return None
    if not words or words[0] != "gone":
        return None
    return [int(w) for w in words[1:] if w.isdigit()]


STATES = {"R": "running", "S": "sleeping", "D": "waiting on a device or disk",
          "T": "stopped by a signal", "t": "stopped by a debugger"}


def state_of(pid):
    """What /proc says process pid is doing ("sleeping", "stopped by a signal", ...)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            letter = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "state unknown"
    return STATES.get(letter, f"state {letter}")


def wait_for_all(procs, seconds):
    """Waits until every process has ended or `seconds` have passed; returns the ranks running."""
    deadline = time.monotonic() + seconds
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [r for r, p in enumerate(procs) if p.poll() is None]


def stuck_ranks(procs, settle):
    """The ranks still running `settle` seconds from now: after a collective timed out with every
    peer alive, the peers that wait in it fail within moments; those left never joined it."""
    return wait_for_all(procs, settle)


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
        cause = next((g for g in read_note(error_file(rank)) or []
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
                os.killpg(p.pid, signal.SIGCONT)  # a stopped rank handles SIGTERM only when resumed
            except ProcessLookupError:
                pass
    wait_for_all(procs, grace)
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
            stuck = (stuck_ranks(procs, min(opts.grace, 2.0))
                     if read_note(error_file(rank)) == [] else [])
            others = [r for r, p in enumerate(procs) if p.poll() is None]
            if stuck:
                names = ", ".join(f"rank {r} ({state_of(procs[r].pid)})" for r in stuck)
                printer.line(f"[launch] {names} never reached the collective that rank {rank} "
                             f"waited in: rank {rank} {describe(failed[1])} when it timed out "
                             f"(MEMGRAD_DIST_TIMEOUT); stopping ranks "
                             f"{', '.join(map(str, others))}\n")
            else:
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
