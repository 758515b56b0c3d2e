#!/usr/bin/env python3
"""Records PyTorch memory snapshots of the programs memgrad also runs, so that memgrad's caching
policy can be held against PyTorch's own decisions (`./memgrad lab replay FILE --validate`).

Needs PyTorch 2.1 or later with a CUDA GPU. Each program runs in a fresh process (a fresh
caching allocator), with history recorded from its first allocation:

  torch.cuda.memory._record_memory_history(max_entries=...)
  ... the program ...
  snapshot = torch.cuda.memory._snapshot()    # what _dump_snapshot(path) pickles
  pickle.dump(snapshot, f, protocol=4)        # 4, not Python's default: the viewer reads 2-4

The programs, with the shapes of memgrad's examples:

  b01      B1, allocated vs reserved: x = 2 MiB float32 tensor, freed, y of the same size
           (examples/behaviours/b01_allocated_vs_reserved.cpp)
  b02      B2, empty_cache: a = 12 MiB, b = 16 MiB, c = 2 MiB; free a, b; empty_cache();
           free c; empty_cache() (b02_empty_cache.cpp)
  b04      B4's default run: on a device limited to 100 MiB with
           set_per_process_memory_fraction, x1 = 60 MiB, free x1, y = 20 MiB, z = 50 MiB,
           which fails; the snapshot is taken at the OOM (b04_fragmentation_oom.cpp). The limit
           is kept under the snapshot's "memgrad" key as "capacity", which `lab replay` replays
           on (PyTorch records only the device's free bytes at an OOM, not the fraction)
  mlp      one training step of train_mlp's model (784-512-512-10, ReLU, batch 128, Adam,
           cross-entropy) on random Fashion-MNIST-shaped data (examples/train_mlp.cpp)
  charlm   one training step of train_charlm's default transformer (width 128, 2 layers, 4
           heads, context 64, batch 32, Adam, tanh GELU; --vocab, default 96) on random tokens
           (examples/train_charlm.cpp, examples/charlm/charlm_model.cpp)

usage:
  python3 tools/pytorch_snapshot.py --out traces/pytorch [--programs b01,b02,...]
  python3 tools/pytorch_snapshot.py --check    exit 0 when torch.cuda is usable here, else 1
  python3 tools/pytorch_snapshot.py --dry-run  run the programs but b04 on the CPU, record
                                               nothing (any PyTorch: checks the programs' code)
Writes OUT/pytorch_<program>.pickle and prints one line per file.
"""
import argparse
import inspect
import math
import os
import pickle
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_charlm import charlm  # noqa: E402

PROGRAMS = ("b01", "b02", "b04", "mlp", "charlm")
MiB = 1 << 20
MAX_ENTRIES = 1_000_000


def check():
    """(ok, message): whether PyTorch imports here and sees a CUDA device."""
    try:
        import torch
    except ImportError as e:
        return False, f"PyTorch is not importable with {sys.executable}: {e}"
    record_history = getattr(torch.cuda.memory, "_record_memory_history", None)
    if record_history is None or "max_entries" not in inspect.signature(record_history).parameters:
        # PyTorch 1.13's takes only `enabled`, and its _snapshot() is a list of segments with no
        # device_traces: nothing to replay.
        return False, (f"PyTorch {torch.__version__} records no allocation history "
                       f"(torch.cuda.memory._record_memory_history(max_entries=...) is PyTorch "
                       f"2.1's); the snapshots need PyTorch 2.1 or later")
    if not torch.cuda.is_available():
        return False, (f"PyTorch {torch.__version__} sees no CUDA device (built with CUDA "
                       f"{torch.version.cuda}); the snapshots need a GPU")
    name = torch.cuda.get_device_name(0)
    return True, f"PyTorch {torch.__version__} with CUDA {torch.version.cuda} on {name}"


# ---- the programs (each runs in its own process) ----


def program_b01(torch, device):
    x = torch.empty((512, 1024), dtype=torch.float32, device=device)  # 2 MiB
    del x  # cached: reserved stays
    y = torch.empty((512, 1024), dtype=torch.float32, device=device)  # the same block again
    return [y]


def program_b02(torch, device):
    # a and b first: allocated after c, they would fit into c's cached 18 MiB tail instead.
    a = torch.empty((3072, 1024), dtype=torch.float32, device=device)  # 12 MiB
    b = torch.empty((4096, 1024), dtype=torch.float32, device=device)  # 16 MiB
    c = torch.empty((512, 1024), dtype=torch.float32, device=device)   # 2 MiB
    del a, b
    torch.cuda.empty_cache()  # returns a's and b's segments, not c's
    del c
    torch.cuda.empty_cache()
    return []


def b04_limit(torch, device):
    """The fraction giving a 100 MiB limit, and the limit as PyTorch computes it."""
    total = torch.cuda.get_device_properties(device).total_memory
    fraction = 100 * MiB / total
    # CUDACachingAllocator: allowed_memory_maximum = static_cast<size_t>(fraction * total); the
    # smallest fraction whose product is not below 100 MiB gives exactly 100 MiB.
    while int(fraction * total) < 100 * MiB:
        fraction = math.nextafter(fraction, 1.0)
    return fraction, int(fraction * total)


def program_b04(torch, device):
    fraction, _ = b04_limit(torch, device)
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    x1 = torch.empty((15360, 1024), dtype=torch.float32, device=device)  # 60 MiB
    del x1  # cached whole, unsplit
    y = torch.empty((5120, 1024), dtype=torch.float32, device=device)  # 20 MiB: splits x1's block
    try:
        z = torch.empty((12800, 1024), dtype=torch.float32, device=device)  # 50 MiB: fails
    except torch.cuda.OutOfMemoryError:
        return [y]  # the snapshot is taken here, at the OOM, as memgrad's B4 --snapshot
    raise SystemExit(f"b04: z ({z.numel() * 4} bytes) fitted: the 100 MiB limit did not apply")


def program_mlp(torch, device):
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.rand((128, 784)).to(device)            # a batch as the data loader moves it
    target = torch.randint(0, 10, (128,)).to(device)
    loss = nn.functional.cross_entropy(model(x), target)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return [model, optimizer]


def program_charlm(torch, device, vocab):
    nn = torch.nn
    width, layers, heads, context, batch = 128, 2, 4, 64, 32
    torch.manual_seed(0)
    model = charlm(torch, vocab, width, layers, heads, context).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    idx = torch.randint(0, vocab, (batch, context + 1)).to(device)
    logits = model(idx[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), idx[:, 1:].reshape(-1))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return [model, optimizer]


def record(program, path, vocab):
    """Runs `program` with history recorded and writes its snapshot to `path` (this process)."""
    import torch
    device = torch.device("cuda", 0)
    torch.cuda.init()
    torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES)
    if program == "charlm":
        keep = program_charlm(torch, device, vocab)
    else:
        keep = globals()[f"program_{program}"](torch, device)
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    # Ignored by PyTorch's tools; tells `lab replay` what it cannot read from the snapshot.
    info = {"device": "cuda:0", "recorded_by": "tools/pytorch_snapshot.py " + program,
            "torch": str(torch.__version__), "gpu": torch.cuda.get_device_name(0)}
    if program == "b04":
        info["capacity"] = b04_limit(torch, device)[1]
    snapshot["memgrad"] = info
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump(snapshot, f, protocol=4)
    os.replace(tmp, path)
    del keep


def dry_run(programs, vocab):
    """Runs `programs` on the CPU, recording nothing: the programs' code works with this
    PyTorch. Returns the exit status."""
    try:
        import torch
    except ImportError as e:
        print(f"pytorch_snapshot: PyTorch is not importable with {sys.executable}: {e}",
              file=sys.stderr)
        return 1
    device = torch.device("cpu")
    for program in programs:
        if program == "b04":
            print("dry run: b04 skipped (its 100 MiB limit is a CUDA device's memory fraction)")
            continue
        if program == "charlm":
            program_charlm(torch, device, vocab)
        else:
            globals()[f"program_{program}"](torch, device)
        print(f"dry run: {program} ran on the CPU with PyTorch {torch.__version__}")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join("traces", "pytorch"),
                        help="folder for the snapshots (default traces/pytorch)")
    parser.add_argument("--programs", default=",".join(PROGRAMS),
                        help=f"comma-separated, from {', '.join(PROGRAMS)} (default: all)")
    parser.add_argument("--vocab", type=int, default=96,
                        help="charlm's vocabulary size (train_charlm's text decides it)")
    parser.add_argument("--check", action="store_true",
                        help="only check that torch.cuda is usable; exit 0 or 1")
    parser.add_argument("--dry-run", action="store_true",
                        help="run the programs but b04 on the CPU (any PyTorch, no GPU), "
                             "recording nothing; b04 needs a CUDA device's memory fraction")
    parser.add_argument("--record", nargs=2, metavar=("PROGRAM", "FILE"), help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.record:
        record(opts.record[0], opts.record[1], opts.vocab)
        return 0
    programs = [p.strip() for p in opts.programs.split(",") if p.strip()]
    unknown = [p for p in programs if p not in PROGRAMS]
    if unknown or not programs:
        print(f"pytorch_snapshot: unknown program(s) {', '.join(unknown) or '(none)'} "
              f"(known: {', '.join(PROGRAMS)})", file=sys.stderr)
        return 1
    if opts.dry_run:
        return dry_run(programs, opts.vocab)
    ok, message = check()
    if opts.check or not ok:
        print(f"pytorch_snapshot: {message}", file=sys.stdout if ok else sys.stderr)
        return 0 if ok else 1
    os.makedirs(opts.out, exist_ok=True)
    print(f"pytorch_snapshot: {message}")
    status = 0
    for program in programs:
        path = os.path.join(opts.out, f"pytorch_{program}.pickle")
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--vocab",
                               str(opts.vocab), "--record", program, path])
        if proc.returncode != 0:
            print(f"pytorch_snapshot: {program} failed (status {proc.returncode})",
                  file=sys.stderr)
            status = 1
            continue
        print(f"snapshot: {path} ({os.path.getsize(path)} bytes)")
    if status == 0:
        print(f"next: ./memgrad lab replay {opts.out}/pytorch_b04.pickle --validate")
    return status


if __name__ == "__main__":
    sys.exit(main())
