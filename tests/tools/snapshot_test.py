#!/usr/bin/env python3
"""End-to-end tests of memory snapshots in PyTorch's format (docs/allocator-lab.md, "Bring your
PyTorch run"):

  - every behaviour example and a short train_mlp run, with MEMGRAD_SNAPSHOT, write snapshots
    that pass tools/validate_snapshot.py (the viewer's rules), that PyTorch 1.13's
    torch.cuda._memory_viz reads (when an interpreter here has torch), that hold only the pickle
    opcodes pytorch.org/memory_viz reads, and that `lab_replay replay --validate` replays
    identically; the JSON writer gives the same dict as the pickle writer;
  - B4's --snapshot at its OOM replays to the same OOM; a run under each policy writes a valid
    snapshot; the committed traces/b04_oom.pickle is what B4 writes today;
  - hand-built PyTorch-format snapshots (tests/tools/fixtures/) replay identically or name what
    the replay cannot model, whether JSON or pickled by CPython (protocols 4 and 5); one whose
    segment decisions are not the caching rules' is reported at its first divergence (status 4);
  - `./memgrad lab snapshot -- PROGRAM ARGS` (lab/cli/lab.py, which ./memgrad runs once it has
    built) writes a snapshot that follows the viewer's rules and replays identically;
  - a snapshot whose ring buffer overflowed (record_memory_history with a small max_entries,
    written by snapshot_tool) says so, follows the viewer's rules and replays, naming it;
  - bad input ends lab_replay with one error line, never a crash;
  - tools/pytorch_snapshot.py, which records PyTorch's snapshots on a GPU, parses its options,
    says why it cannot record here, and its programs run on the CPU (when torch imports);
  - committed PyTorch recordings (traces/pytorch/*.pickle) replay identically, when any exist.

The pickle and JSON runs are compared with event times and addresses renumbered (the OS places
the memory of each run elsewhere). torch is looked for in this interpreter, then in Debian's
/usr/bin/python3 (python3-torch); the tests that need it are skipped, saying so, without it.

usage: snapshot_test.py BUILD_DIR
"""
import concurrent.futures
import glob
import io
import json
import os
import pickle
import pickletools
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, "build")
LAB = os.path.join(BUILD, "lab", "cli", "lab_replay")
TRAIN_MLP = os.path.join(BUILD, "examples", "train_mlp")
B04 = os.path.join(BUILD, "examples", "behaviours", "b04_fragmentation_oom")
SNAPSHOT_TOOL = os.path.join(BUILD, "tests", "docs", "snapshot_tool")
LAB_PY = os.path.join(ROOT, "lab", "cli", "lab.py")
MNIST = "/usr/share/datasets/fashion-mnist"
FIXTURES = os.path.join(ROOT, "tests", "tools", "fixtures")
COMMITTED_B04 = os.path.join(ROOT, "traces", "b04_oom.pickle")

sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, FIXTURES)
import make_pytorch_fixtures  # noqa: E402
import validate_snapshot  # noqa: E402

# The opcodes the JavaScript unpickler of pytorch.org/memory_viz reads (MemoryViz.js); any other
# makes it fail with "UNKNOWN OPCODE".
VIEWER_OPCODES = {
    "PROTO", "FRAME", "STOP", "MARK", "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "DICT", "LIST",
    "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "APPEND", "APPENDS", "SETITEM", "SETITEMS", "BININT",
    "BININT1", "BININT2", "LONG1", "BINUNICODE", "SHORT_BINUNICODE", "BINFLOAT", "NONE",
    "NEWTRUE", "NEWFALSE", "MEMOIZE", "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET"}

# Runs with MEMGRAD_SNAPSHOT: name -> argv (b20 writes its pictures to --out, set per run).
SHORT_MLP = ["--epochs", "1", "--max-steps", "2"]


def run(args, env=None, timeout=120):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=dict(os.environ, **(env or {})))


def replay(path, *flags):
    return run([LAB, "replay", path, "--policy", "caching", "--timed-passes", "1"] + list(flags))


def behaviour_programs():
    found = glob.glob(os.path.join(BUILD, "examples", "behaviours", "b[0-9][0-9]_*"))
    return sorted(p for p in found if os.path.isfile(p) and os.access(p, os.X_OK))


def snapshot_files(path):
    """The files MEMGRAD_SNAPSHOT=path wrote: path itself, or one per device (t.cpu.pickle)."""
    stem, ext = os.path.splitext(path)
    return [p for p in [path] + sorted(glob.glob(f"{glob.escape(stem)}.*{ext}"))
            if os.path.isfile(p)]


def load(path):
    return validate_snapshot.load(path)


def as_json_value(value):
    """`value` as JSON would hold it: tuples as lists, dict keys in sorted order."""
    if isinstance(value, dict):
        return {k: as_json_value(value[k]) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [as_json_value(v) for v in value]
    return value


def without_times(value):
    """The snapshot with every event's time_us set to 0 (two runs differ only there)."""
    value = json.loads(json.dumps(as_json_value(value)))
    for trace in value["device_traces"]:
        for e in trace:
            e["time_us"] = 0
    return value


def without_addresses(value):
    """without_times(value) with every address as (segment, offset): the segment numbered in the
    order the snapshot first names its base (the history's segment events, then the final
    segments), so that two runs whose memory the OS placed elsewhere compare equal."""
    value = without_times(value)
    bases = []
    for trace in value["device_traces"]:
        bases += [e["addr"] for e in trace if e["action"] in ("segment_alloc", "segment_map")]
    bases += [seg["address"] for seg in value["segments"]]
    number = {}
    for base in bases:
        number.setdefault(base, len(number))
    ordered = sorted(number)

    def located(addr):
        below = [b for b in ordered if b <= addr]
        return [number[below[-1]], addr - below[-1]] if below else ["?", addr]

    for trace in value["device_traces"]:
        for e in trace:
            if e["action"] not in ("oom", "snapshot", "user_defined"):
                e["addr"] = located(e["addr"])
    for seg in value["segments"]:
        seg["address"] = located(seg["address"])
        for block in seg["blocks"]:
            block["address"] = located(block["address"])
    return value


def masked(output, path):
    """A replay's output with its file name and times masked."""
    return re.sub(r"\d+ ns\b", "N ns", output.replace(path, "FILE"))


class Recorded:
    """The snapshots of every program, written once for all tests."""
    tmp = None
    runs = {}      # name -> (returncode, stderr, [files])
    json_runs = {}  # name -> [files] of the same program with a .json path


def record(name, argv, path):
    env = {"MEMGRAD_SNAPSHOT": path}
    proc = run(argv, env=env, timeout=300)
    return name, proc.returncode, proc.stderr, snapshot_files(path)


def setUpModule():
    Recorded.started = time.time()
    Recorded.tmp = tempfile.mkdtemp(prefix="memgrad-snapshots-")
    jobs = []
    for program in behaviour_programs():
        name = os.path.basename(program)
        argv = [program]
        if name.startswith("b20_"):
            argv += ["--out", os.path.join(Recorded.tmp, "b20-pictures")]
        jobs.append((name, argv, ".pickle"))
        if name.startswith("b02_"):
            jobs.append((name, argv, ".json"))
    if os.path.isdir(MNIST):
        argv = [TRAIN_MLP] + SHORT_MLP
        jobs += [("train_mlp", argv, ".pickle"), ("train_mlp", argv, ".json")]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(record, name, argv,
                               os.path.join(Recorded.tmp, name + ext))
                   for name, argv, ext in jobs]
        for (name, _, ext), future in zip(jobs, futures):
            _, status, stderr, files = future.result()
            if ext == ".json":
                Recorded.json_runs[name] = files
            else:
                Recorded.runs[name] = (status, stderr, files)


def tearDownModule():
    shutil.rmtree(Recorded.tmp, ignore_errors=True)


class MemgradSnapshots(unittest.TestCase):
    def pickles(self):
        files = [f for _, _, fs in Recorded.runs.values() for f in fs]
        self.assertTrue(files)
        return files

    def test_every_program_writes_a_snapshot(self):
        self.assertGreaterEqual(len(Recorded.runs), 21)
        for name, (status, stderr, files) in Recorded.runs.items():
            with self.subTest(program=name):
                self.assertEqual(status, 0, stderr)
                self.assertTrue(files, f"{name} wrote no snapshot")
                # Its history: requests, not only the snapshot entry taken at exit (a program
                # that measures on fresh allocators and restores the device writes the last
                # allocator that recorded, not the empty one it restored).
                for path in files:
                    events = [e for t in load(path)["device_traces"] for e in t
                              if e["action"] == "alloc"]
                    self.assertTrue(events, f"{os.path.basename(path)} holds no allocation")

    def test_every_snapshot_follows_the_viewers_rules(self):
        for path in self.pickles():
            with self.subTest(snapshot=os.path.basename(path)):
                self.assertEqual(validate_snapshot.validate(load(path)), [])

    def test_every_snapshot_holds_only_the_viewers_opcodes(self):
        for path in self.pickles():
            with self.subTest(snapshot=os.path.basename(path)):
                with open(path, "rb") as f:
                    data = f.read()
                ops = [(op.name, arg) for op, arg, _ in pickletools.genops(data)]
                self.assertEqual(ops[0][0], "PROTO")
                self.assertIn(ops[0][1], (2, 3, 4))
                self.assertEqual(set(name for name, _ in ops) - VIEWER_OPCODES, set())

    def test_every_snapshot_ends_with_its_snapshot_entry(self):
        # Taken at exit while recording: PyTorch's snapshot entry, addr 0, the active bytes of
        # the segments written (the validator's `markers` rule checks the size).
        for path in self.pickles():
            with self.subTest(snapshot=os.path.basename(path)):
                traces = [t for t in load(path)["device_traces"] if t]
                self.assertTrue(traces)
                last = traces[-1][-1]
                self.assertEqual((last["action"], last["addr"]), ("snapshot", 0))
                self.assertNotIn("frames", last)

    def test_times_are_epoch_microseconds_and_frames_name_the_context(self):
        # PyTorch writes time_us since the Unix epoch; its viewer shows each frame as
        # filename:line:name, which memgrad fills with the op, module, phase and label.
        started = int(Recorded.started * 1e6)
        now = int(time.time() * 1e6)
        kinds = set()
        for path in self.pickles():
            with self.subTest(snapshot=os.path.basename(path)):
                snapshot = load(path)
                for trace in snapshot["device_traces"]:
                    for e in trace:
                        self.assertTrue(started <= e["time_us"] <= now, e)
                        for frame in e.get("frames", []):
                            kinds.add(frame["filename"])
                            self.assertEqual(frame["line"], 0)
                            self.assertTrue(frame["name"])
                for seg in snapshot["segments"]:
                    for block in seg["blocks"]:
                        self.assertIn("frames", block)  # [] for a free block, as PyTorch
                        if block["state"] == "inactive":
                            self.assertEqual(block["frames"], [])
        self.assertEqual(kinds - {"op", "module", "phase", "label", "memgrad"}, set())
        self.assertTrue({"op", "module", "phase"} <= kinds, kinds)

    def test_every_snapshot_replays_identically(self):
        for path in self.pickles():
            with self.subTest(snapshot=os.path.basename(path)):
                proc = replay(path, "--validate")
                self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
                self.assertIn("validate: identical", proc.stdout)

    def test_the_json_writer_gives_the_pickle_writers_dict(self):
        self.assertIn("b02_empty_cache", Recorded.json_runs)
        if os.path.isdir(MNIST):
            self.assertIn("train_mlp", Recorded.json_runs)
        for name, json_files in Recorded.json_runs.items():
            pickle_files = Recorded.runs[name][2]
            self.assertEqual(len(json_files), len(pickle_files), name)
            for p, j in zip(pickle_files, json_files):
                with self.subTest(snapshot=os.path.basename(j)):
                    with open(p, "rb") as f:
                        from_pickle = pickle.load(f)
                    with open(j, encoding="utf-8") as f:
                        from_json = json.load(f)
                    # Two runs: only the event times and where the OS put the memory may
                    # differ.
                    self.assertEqual(without_addresses(from_pickle),
                                     without_addresses(from_json))


def torch_interpreter():
    """A Python that can import torch.cuda._memory_viz: this one, else Debian's, else None."""
    for exe in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
        if os.access(exe, os.X_OK) and subprocess.run(
                [exe, "-c", "import torch.cuda._memory_viz"], capture_output=True).returncode == 0:
            return exe
    return None


# Runs in the interpreter that has torch: each of _memory_viz's functions that take a segment
# list, on every snapshot named in argv (flamegraphs returned as text: nothing is downloaded).
MEMORY_VIZ_CHECK = r"""
import pickle, sys
import torch
from torch.cuda import _memory_viz as viz
text = lambda s: s
print("torch", torch.__version__)
previous = []
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        segments = pickle.load(f)["segments"]
    viz.segments(segments, format_flamegraph=text)
    viz.memory(segments, format_flamegraph=text)
    viz.compare(previous, segments, format_flamegraph=text)
    stats = viz.stats(segments)
    assert stats["segments"] == len(segments), path
    assert stats["total_size"].value == sum(s["total_size"] for s in segments), path
    previous = segments
print("read", len(sys.argv) - 1)
"""


class PytorchMemoryViz(unittest.TestCase):
    def test_pytorchs_memory_viz_reads_the_segments(self):
        exe = torch_interpreter()
        if exe is None:
            self.skipTest("no Python here can import torch (Debian: apt-get install "
                          "python3-torch): torch.cuda._memory_viz not checked")
        files = [f for _, _, fs in Recorded.runs.values() for f in fs]
        proc = run([exe, "-c", MEMORY_VIZ_CHECK] + files, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn(f"read {len(files)}", proc.stdout)


class B04Snapshot(unittest.TestCase):
    def test_b04_snapshot_at_the_oom_replays_to_the_same_oom(self):
        path = os.path.join(Recorded.tmp, "b04-oom.pickle")
        proc = run([B04, "--snapshot", path])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(f"memory snapshot of the default run at the OOM: {path}", proc.stdout)
        self.assertEqual(validate_snapshot.validate(load(path)), [])
        events = load(path)["device_traces"][0]
        self.assertEqual([e["action"] for e in events if e["action"] == "oom"], ["oom"])
        proc = replay(path, "--validate")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertRegex(proc.stdout, r"validate: the replay ran out of memory at event \d+, as "
                                      r"the recording did")
        self.assertIn("validate: identical", proc.stdout)

    def test_the_committed_b04_snapshot_is_current(self):
        # docs/allocator-lab.md replays traces/b04_oom.pickle; it must be what B4 writes today
        # (`./memgrad example b04 --snapshot traces/b04_oom.pickle`), event times aside.
        path = os.path.join(Recorded.tmp, "b04-current.pickle")
        self.assertEqual(run([B04, "--snapshot", path]).returncode, 0)
        self.assertEqual(without_times(load(COMMITTED_B04)), without_times(load(path)))


class PolicySnapshots(unittest.TestCase):
    def test_a_run_under_each_policy_writes_a_valid_snapshot(self):
        layout = run([LAB, "layout", "--summary-only"])
        self.assertEqual(layout.returncode, 0, layout.stderr)
        lines = layout.stdout.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("policy "))
        policies = [line.split()[0] for line in lines[start + 1:] if line.strip()]
        self.assertGreaterEqual(len(policies), 7)
        program = os.path.join(BUILD, "examples", "behaviours", "b02_empty_cache")

        def one(policy):
            path = os.path.join(Recorded.tmp, f"policy-{policy}.pickle")
            proc = run([program], env={"MEMGRAD_SNAPSHOT": path,
                                       "MEMGRAD_ALLOC_CONF": f"policy:{policy}"})
            return policy, proc, snapshot_files(path)

        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(one, policies))
        for policy, proc, files in results:
            with self.subTest(policy=policy):
                self.assertNotIn("terminate called", proc.stderr)
                self.assertTrue(files, proc.stderr)
                for path in files:
                    snapshot = load(path)
                    self.assertEqual(validate_snapshot.validate(snapshot), [])
                    self.assertEqual(snapshot["allocator_settings"]["memgrad_policy"], policy)
                    done = replay(path, "--validate")
                    self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
                    self.assertIn("validate: identical", done.stdout)


class LabSnapshot(unittest.TestCase):
    def test_lab_snapshot_runs_a_program_and_writes_a_valid_snapshot(self):
        out = os.path.join(Recorded.tmp, "lab", "b02.pickle")
        proc = run([sys.executable, LAB_PY, "--build-dir", BUILD, "snapshot", "--out", out,
                    "--", "b02"])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn(f"snapshot: {os.path.relpath(out, ROOT)} ({os.path.getsize(out)} bytes)",
                      proc.stdout)
        self.assertIn("next: open it in https://pytorch.org/memory_viz", proc.stdout)
        self.assertRegex(proc.stderr, r"memory snapshot of cpu \(\d+ events\) written to ")
        snapshot = load(out)
        self.assertEqual(validate_snapshot.validate(snapshot), [])
        self.assertEqual(snapshot["memgrad"]["device"], "cpu")
        actions = [e["action"] for e in snapshot["device_traces"][0]]
        self.assertIn("segment_free", actions)  # B2's empty_cache() released segments
        self.assertEqual(actions[-1], "snapshot")
        # The program's arguments reach it: b20 writes its pictures where --out says.
        pictures = os.path.join(Recorded.tmp, "lab", "b20-pictures")
        b20 = os.path.join(Recorded.tmp, "lab", "b20.json")
        proc = run([sys.executable, LAB_PY, "--build-dir", BUILD, "snapshot", "--out", b20,
                    "--", "b20", "--out", pictures])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertTrue(os.listdir(pictures))
        files = snapshot_files(b20)
        self.assertTrue(files)
        for path in files:
            with open(path, encoding="utf-8") as f:
                self.assertEqual(validate_snapshot.validate(json.load(f)), [], path)
            done = replay(path, "--validate")
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            self.assertIn("validate: identical", done.stdout)


class RingOverflow(unittest.TestCase):
    def test_a_snapshot_after_the_ring_overflowed_says_so_and_replays(self):
        path = os.path.join(Recorded.tmp, "ring.pickle")
        proc = run([SNAPSHOT_TOOL, "ring", "64", path])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("ring of 64 entries: 64 events kept, the ring overflowed: yes", proc.stdout)
        snapshot = load(path)
        settings = snapshot["allocator_settings"]
        self.assertIs(settings["trace_alloc_overflowed"], True)
        self.assertEqual(settings["trace_alloc_max_entries"], 64)
        trace = snapshot["device_traces"][0]
        self.assertEqual(len(trace), 64)  # the snapshot entry took the oldest one's place
        self.assertEqual(trace[-1]["action"], "snapshot")
        self.assertEqual(validate_snapshot.validate(snapshot), [])
        proc = replay(path, "--validate")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("note: the trace's ring buffer overflowed: allocations older than its "
                      "first event are taken from the final segments, as live at time zero",
                      proc.stdout)
        self.assertRegex(proc.stdout, r"note: \d+ blocks were live before the history began")
        # The last segment, obtained within the ring, is compared.
        self.assertIn("validate: identical: 1 segment events", proc.stdout)


class PytorchFixtures(unittest.TestCase):
    RUN = os.path.join(FIXTURES, "pytorch_caching_run.json")
    FEATURES = os.path.join(FIXTURES, "pytorch_features.json")
    DIVERGENT = os.path.join(FIXTURES, "pytorch_divergent.json")

    def test_the_fixtures_are_what_their_script_writes(self):
        for name, build in make_pytorch_fixtures.FIXTURES.items():
            with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
                self.assertEqual(f.read(), make_pytorch_fixtures.text_of(build()), name)

    def test_the_fixtures_follow_the_viewers_rules(self):
        for path in (self.RUN, self.FEATURES, self.DIVERGENT):
            self.assertEqual(validate_snapshot.validate(load(path)), [], path)

    def test_a_pytorch_caching_run_replays_identically(self):
        proc = replay(self.RUN, "--validate")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        # 3 segment_alloc and 1 segment_free (empty_cache()); 2 + 20 + 12 MiB at the peak.
        self.assertIn("validate: identical: 4 segment events (action and size, in order), peak "
                      "reserved 34.00 MiB as recorded", proc.stdout)
        self.assertNotIn("note:", proc.stdout)

    def test_what_the_replay_cannot_model_is_named(self):
        proc = replay(self.FEATURES, "--validate")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        # The one segment the history allocates (2 MiB, on the second stream) and the peak
        # still agree.
        self.assertIn("validate: identical: 1 segment events (action and size, in order), peak "
                      "reserved 24.00 MiB as recorded", proc.stdout)
        notes = [line for line in proc.stdout.splitlines() if line.startswith("note: ")]
        expected = [
            "note: the trace's ring buffer overflowed: allocations older than its first event "
            "are taken from the final segments, as live at time zero",
            "note: allocator settings memgrad does not model, ignored (the replay runs as if "
            "they were unset): PYTORCH_CUDA_ALLOC_CONF pinned_use_background_threads:True, "
            "graph_capture_record_stream_reuse=True (CUDA graph capture), "
            "pinned_num_register_threads=8 (pinned host memory), "
            "pinned_use_cuda_host_register=True (pinned host memory), "
            "release_lock_on_cudamalloc=True (locking around cudaMalloc)",
            "note: 1 segments belong to private pools (CUDA graphs, MemPool): their requests "
            "are replayed in the default pool",
            "note: 2 streams allocate: each is replayed as its own stream; frees take effect at "
            "free_completed (record_stream waits are not modelled)",
            "note: 3 blocks were live before the history began: allocated first, at time zero",
        ]
        self.assertEqual(notes, expected)

    def test_a_divergence_is_reported_with_its_context_and_fails(self):
        # PyTorch's rule gives F's 12 MiB request a 12 MiB segment; the recording says 20 MiB.
        proc = replay(self.DIVERGENT, "--validate")
        self.assertEqual(proc.returncode, 4, proc.stdout + proc.stderr)
        self.assertNotIn("validate: identical", proc.stdout)
        lines = proc.stdout.splitlines()
        first = lines.index("validate: diverges at segment event #2: recorded segment_alloc "
                            "20971520, replayed segment_alloc 12582912")
        self.assertEqual(
            [re.sub(r" +", " ", line) for line in lines[first + 1:first + 6]],
            [" #0 recorded segment_alloc 2097152 replayed segment_alloc 2097152",
             " #1 recorded segment_alloc 20971520 replayed segment_alloc 20971520",
             " #2 recorded segment_alloc 20971520 replayed segment_alloc 12582912 <- first "
             "difference",
             " #3 recorded segment_free 20971520 replayed segment_free 12582912",
             "validate: peak reserved 34.00 MiB replayed, 42.00 MiB recorded"])
        # Through ./memgrad lab's own front end, the same status.
        proc = run([sys.executable, LAB_PY, "--build-dir", BUILD, "replay", self.DIVERGENT,
                    "--validate", "--policy", "caching", "--timed-passes", "1"])
        self.assertEqual(proc.returncode, 4, proc.stdout + proc.stderr)
        self.assertIn("<- first difference", proc.stdout)

    def test_a_snapshot_without_history_is_one_line_and_nothing_to_replay(self):
        # PyTorch's torch.cuda.memory._snapshot() without _record_memory_history: segments only.
        snapshot = load(self.RUN)
        snapshot["device_traces"] = [[]]
        path = os.path.join(Recorded.tmp, "no-history.pickle")
        with open(path, "wb") as f:
            pickle.dump(snapshot, f, protocol=4)
        segments = len(snapshot["segments"])
        reserved = sum(seg["total_size"] for seg in snapshot["segments"]) / 2**20
        blocks = sum(block["state"] == "active_allocated"
                     for seg in snapshot["segments"] for block in seg["blocks"])
        for flag, status in (([], 0), (["--validate"], 3)):
            proc = replay(path, *flag)
            self.assertEqual(proc.returncode, status, proc.stdout + proc.stderr)
            self.assertEqual(proc.stderr, "")
            self.assertEqual(proc.stdout.splitlines()[-1],
                             f"snapshot {path} (device cuda:0): {segments} segments, "
                             f"{reserved:.2f} MiB reserved, {blocks} blocks allocated, and no "
                             f"history (device_traces[0] has no events; PyTorch records them "
                             f"after torch.cuda.memory._record_memory_history()): nothing to "
                             f"replay")

    def test_pickles_written_by_cpython_replay_as_the_json(self):
        snapshot = load(self.RUN)
        for seg in snapshot["segments"]:
            seg["segment_pool_id"] = tuple(seg["segment_pool_id"])  # as PyTorch has it
        expected = masked(replay(self.RUN, "--validate").stdout, self.RUN)
        for protocol in (4, 5):
            with self.subTest(protocol=protocol):
                path = os.path.join(Recorded.tmp, f"fixture-protocol{protocol}.pickle")
                with open(path, "wb") as f:
                    pickle.dump(snapshot, f, protocol=protocol)
                proc = replay(path, "--validate")
                self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
                self.assertEqual(masked(proc.stdout, path), expected)


class BadInput(unittest.TestCase):
    def check_error(self, path, text):
        proc = replay(path, "--validate")
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        errors = [line for line in proc.stderr.splitlines() if line.startswith("lab_replay: ")]
        self.assertEqual(len(errors), 1, proc.stderr)
        self.assertTrue(errors[0].startswith("lab_replay: error: "), proc.stderr)
        self.assertIn(text, errors[0])
        for crash in ("terminate called", "Traceback", "Aborted", "Segmentation"):
            self.assertNotIn(crash, proc.stderr)

    def write(self, name, data):
        path = os.path.join(Recorded.tmp, name)
        with open(path, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        return path

    def fixture(self):
        return load(PytorchFixtures.RUN)

    def test_a_truncated_pickle_is_an_error(self):
        data = pickle.dumps(self.fixture(), protocol=4)
        for cut in (len(data) // 3, len(data) - 1):
            with self.subTest(cut=cut):
                self.check_error(self.write("truncated.pickle", data[:cut]), "at byte")

    def test_a_pickle_with_a_global_is_an_error(self):
        import collections
        snapshot = self.fixture()
        snapshot["allocator_settings"] = collections.OrderedDict(snapshot["allocator_settings"])
        data = pickle.dumps(snapshot, protocol=2)
        self.assertIn("GLOBAL", {op.name for op, _, _ in pickletools.genops(data)})
        self.check_error(self.write("global.pickle", data), "GLOBAL")

    def test_an_unknown_action_is_an_error(self):
        snapshot = self.fixture()
        snapshot["device_traces"][0][5]["action"] = "alloc_async"
        self.check_error(self.write("action.json", json.dumps(snapshot)),
                         "device_traces[0][5]: unknown action 'alloc_async'")

    def test_a_negative_size_is_an_error(self):
        snapshot = self.fixture()
        snapshot["device_traces"][0][2]["size"] = -1
        self.check_error(self.write("size.json", json.dumps(snapshot)),
                         "device_traces[0][2]: \"size\" is -1")


class PytorchSnapshotScript(unittest.TestCase):
    """tools/pytorch_snapshot.py needs a GPU to record; here its code is checked as far as
    possible: its options, its refusal without CUDA, its programs run on the CPU."""
    SCRIPT = os.path.join(ROOT, "tools", "pytorch_snapshot.py")

    def test_help_names_every_program(self):
        proc = run([sys.executable, self.SCRIPT, "--help"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        for program in ("b01", "b02", "b04", "mlp", "charlm"):
            self.assertIn(program, proc.stdout)

    def test_check_says_whether_it_can_record(self):
        for exe in dict.fromkeys([sys.executable, torch_interpreter() or sys.executable]):
            with self.subTest(python=exe):
                proc = run([exe, self.SCRIPT, "--check"])
                self.assertIn(proc.returncode, (0, 1), proc.stderr)
                lines = (proc.stdout + proc.stderr).splitlines()
                self.assertEqual(len(lines), 1, lines)
                self.assertTrue(lines[0].startswith("pytorch_snapshot: "), lines)

    def test_an_unknown_program_is_refused(self):
        proc = run([sys.executable, self.SCRIPT, "--programs", "b01,b99"])
        self.assertEqual(proc.returncode, 1)
        self.assertIn("unknown program(s) b99", proc.stderr)

    def test_the_programs_run_on_the_cpu(self):
        exe = torch_interpreter()
        if exe is None:
            self.skipTest("no Python here can import torch (Debian: apt-get install "
                          "python3-torch): the PyTorch programs not run")
        proc = run([exe, self.SCRIPT, "--dry-run"], timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        for program in ("b01", "b02", "mlp", "charlm"):
            self.assertIn(f"dry run: {program} ran on the CPU", proc.stdout)


class CommittedPytorchSnapshots(unittest.TestCase):
    def test_every_committed_pytorch_snapshot_replays_identically(self):
        files = sorted(glob.glob(os.path.join(ROOT, "traces", "pytorch", "*.pickle")))
        if not files:
            self.skipTest("traces/pytorch/ holds no snapshot yet (record them on a GPU machine: "
                          "python3 tools/pytorch_snapshot.py --out traces/pytorch)")
        for path in files:
            with self.subTest(snapshot=os.path.basename(path)):
                proc = replay(path, "--validate")
                self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
                self.assertIn("validate: identical", proc.stdout)


SHARED_SNAPSHOTS = os.path.join(os.path.dirname(ROOT), "shared", "reference",
                                "real-pytorch-snapshots")


class SharedPytorchSnapshots(unittest.TestCase):
    """Snapshots PyTorch users recorded on real GPUs (read where they are, never copied): each
    replays from the start state rebuilt from its final segments (the first line says which)."""

    # file: (segments, blocks allocated) at the start of its history
    IDENTICAL = {
        "jasper_snapshot.pickle": (3, 31),  # one wholly free 2 MiB segment at the start
        "kk_cs336_systems_memory_logs_memory_ctx128_forward.pickle": (227, 324),  # line 2^64-1
        "wedson_medium_128_inference.pickle": (98, 223),  # four wholly free segments
        # 10 streams; 39 releases of the cache before retried segment allocations, which need
        # the peak as the device's size and the recorded order of segments by address.
        "maphsge_04d383c_snapshot.pickle": (131, 195),
    }

    def test_they_replay_identically_from_their_start_state(self):
        if not os.path.isdir(SHARED_SNAPSHOTS):
            self.skipTest(f"{SHARED_SNAPSHOTS} is not on this machine")
        for name, (segments, blocks) in self.IDENTICAL.items():
            with self.subTest(snapshot=name):
                proc = replay(os.path.join(SHARED_SNAPSHOTS, name), "--validate")
                self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
                self.assertRegex(proc.stdout, rf"(?m)^start state: {segments} segments \([0-9.]+ "
                                              rf"MiB\), {blocks} blocks allocated")
                self.assertIn("validate: identical", proc.stdout)
        proc = replay(os.path.join(SHARED_SNAPSHOTS, "maphsge_04d383c_snapshot.pickle"),
                      "--validate")
        self.assertIn("note: the device's capacity is not recorded: taken as the peak reserved, "
                      "22519218176 bytes (39 releases", proc.stdout)
        self.assertIn("validate: identical: 1163 segment events", proc.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
