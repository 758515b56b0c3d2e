#!/usr/bin/env python3
"""dist_bench's peer: the same measurements with torch.distributed (Gloo) and PyTorch's DDP.

  torch_dist_peer.py [--quick] [--config]

Runs with a Python that imports torch (Debian's python3-torch: /usr/bin/python3), and prints
what bench/dist_bench.cpp prints, under the same names (bench/bench_util.h format):

  1. all_reduce of 64 MiB (16 Mi float32, sum) on 2 ranks over Gloo on loopback: median time,
     algorithm and bus bandwidth;
  2. the MLP step of bench/bench_mlp.h (784-512-512-10, ReLU, cross-entropy, SGD lr 0.1 momentum
     0.9, global batch 128 from a pool of 16 synthetic batches) in one process on 2 threads and
     on 1, and under torch.nn.parallel.DistributedDataParallel on 2 ranks x 1 thread, each with
     its 64 rows of the same global batch (PyTorch's defaults: buckets of 25 MiB, a first bucket
     of 1 MiB, reduced on Gloo's own thread while backward goes on). A step is zero_grad
     (set_to_none) + forward + backward + step; rank 0's steps are timed, each on its own.
  3. after each of those step runs, the same-start run (bench/same_start.h, in Python:
     bench/peer/same_start.py): the same model given the weights dist_bench gives its own, 20
     steps on the global batches it draws, each rank on its rows; the losses of the first and
     last steps, averaged over the ranks.

Each part runs in fresh processes (torch.multiprocessing's spawn, a file store), as dist_bench
starts its ranks. Timing lives here and in dist_bench, never in tests.
"""
import os
import re
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import same_start  # noqa: E402  (bench/same_start.h's weights and batches)

BATCH, INPUTS, HIDDEN, CLASSES, POOL = 128, 784, 512, 10, 16
ALLREDUCE_BYTES = 64 << 20


def report(name, value, unit):
    # The same-start figures to 9 significant digits, as bench/same_start.h prints them.
    digits = 9 if "_same_start_" in name else 4
    print(f"{name}: {value:.{digits}g} {unit}", flush=True)


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def model():
    return torch.nn.Sequential(torch.nn.Linear(INPUTS, HIDDEN), torch.nn.ReLU(),
                               torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
                               torch.nn.Linear(HIDDEN, CLASSES))


def init(rank, world, store_file):
    dist.init_process_group("gloo", init_method=f"file://{store_file}", rank=rank,
                            world_size=world)


def all_reduce_rank(rank, world, store_file, quick, queue):
    torch.set_num_threads(1)
    init(rank, world, store_file)
    t = torch.ones(ALLREDUCE_BYTES // 4)
    seconds = []
    for i in range(2 + (3 if quick else 10)):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(t)
        if i >= 2:
            seconds.append(time.perf_counter() - start)
    dist.destroy_process_group()
    median = statistics.median(seconds)
    algbw = ALLREDUCE_BYTES / median / 1e9
    figures = [("allreduce_64mib_median", median * 1e3, "ms"),
               ("allreduce_64mib_algbw", algbw, "GB/s"),
               ("allreduce_64mib_busbw", algbw * 2 * (world - 1) / world, "GB/s")]
    queue.put((rank, figures if rank == 0 else [], []))


def same_start_losses(rank, world, net, runner):
    """The same-start run (bench/same_start.h) on this rank: `net` (wrapped by `runner`: DDP,
    or itself in one process) given the weights, and trained on this rank's rows of the global
    batches, that dist_bench draws alike; this rank's loss of every step.

    The DDP wrapper of the timed run is reused (its ranks stay in step: both load the same
    values, and DDP broadcasts only at construction), and the ranks' losses are averaged by the
    parent: torch 1.13 can deadlock at exit when a second DDP wrapper, or a collective on a
    tensor made in Python, leaves Gloo's worker thread releasing a Python-owned tensor while the
    main thread, holding the GIL, destroys the process group and joins that thread.
    """
    params = list(net.named_parameters())
    shapes = same_start.linear_stack_shapes([INPUTS, HIDDEN, HIDDEN, CLASSES])
    if [list(p.shape) for _, p in params] != shapes:
        raise RuntimeError(f"same_start: the model's shapes differ from {shapes}")
    with torch.no_grad():
        for i, (name, p) in enumerate(params):
            values = same_start.parameter_values(i, name, list(p.shape))
            p.copy_(torch.tensor(values, dtype=torch.float32).view(p.shape))
    rows = BATCH // world
    inputs, targets = [], []
    for b in range(same_start.POOL_BATCHES):
        seed = same_start.batch_seed(b)
        x = torch.tensor(same_start.normal_values(seed, BATCH * INPUTS),
                         dtype=torch.float32).view(BATCH, INPUTS)
        y = torch.tensor(same_start.integer_values(seed + 1, BATCH, CLASSES), dtype=torch.int64)
        inputs.append(x[rank * rows:(rank + 1) * rows].contiguous())
        targets.append(y[rank * rows:(rank + 1) * rows].contiguous())
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for s in range(same_start.STEPS):
        b = s % same_start.POOL_BATCHES
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(runner(inputs[b]), targets[b])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def step_rank(rank, world, store_file, quick, threads, queue):
    torch.set_num_threads(threads)
    if world > 1:
        init(rank, world, store_file)
    torch.manual_seed(0)
    rows = BATCH // world
    inputs, targets = [], []
    for _ in range(POOL):
        x = torch.randn(BATCH, INPUTS)
        y = torch.randint(0, CLASSES, (BATCH,))
        inputs.append(x[rank * rows:(rank + 1) * rows].contiguous())
        targets.append(y[rank * rows:(rank + 1) * rows].contiguous())
    net = model()
    runner = torch.nn.parallel.DistributedDataParallel(net) if world > 1 else net
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    warmup, timed = (5, 30) if quick else (20, 200)
    step_ms = []
    for s in range(warmup + timed):
        b = s % POOL
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(runner(inputs[b]), targets[b])
        loss.backward()
        optimizer.step()
        if s >= warmup:
            step_ms.append((time.perf_counter() - start) * 1e3)
    losses = same_start_losses(rank, world, net, runner)
    if world > 1:
        dist.destroy_process_group()
    prefix = (f"mlp_step_{world}rank_ddp" if world > 1 else
              "mlp_step_1rank" if threads == 2 else f"mlp_step_1rank_{threads}thread")
    figures = [(prefix + "_median", statistics.median(step_ms), "ms"),
               (prefix + "_p90", quantile(step_ms, 0.9), "ms")] if rank == 0 else []
    queue.put((rank, figures, [(prefix + "_same_start_loss", losses)]))


def run_part(target, world, *args):
    """Runs `target` on `world` fresh processes; returns rank 0's figures and the first and last
    steps of each series the ranks report, averaged over them."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [ctx.Process(target=target, args=(r, world, store, *args, queue))
                 for r in range(world)]
        for p in procs:
            p.start()
        # One item per rank: (rank, its figures, its per-step series), rank 0's figures only.
        items = [queue.get(timeout=600) for _ in range(world)]
        figures = []
        for rank, rank_figures, _ in sorted(items):
            figures += rank_figures
        # Each series averaged over the ranks (the loss of the global batch), step by step;
        # its first and last steps reported.
        for k, (name, _) in enumerate(items[0][2]):
            series = [sum(steps) / world for steps in zip(*(item[2][k][1] for item in items))]
            figures += [(name + "_first", series[0], "nats"), (name + "_last", series[-1], "nats")]
        for p in procs:
            p.join()
            if p.exitcode != 0:
                sys.exit(f"torch_dist_peer: a rank of {target.__name__} exited with "
                         f"{p.exitcode}")
    return figures


def main(argv):
    quick = "--quick" in argv
    print(f"config: torch.distributed {torch.__version__}, Gloo, 2 threads", flush=True)
    blas = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    print(f"config: BLAS {blas.group(1) if blas else 'unknown'} (torch's BLAS_INFO)", flush=True)
    print("config: Gloo on loopback; 1 process x 2 threads against 2 ranks x 1 thread",
          flush=True)
    if "--config" in argv:
        return 0
    figures = run_part(all_reduce_rank, 2, quick)
    one = run_part(step_rank, 1, quick, 2)
    one_thread = run_part(step_rank, 1, quick, 1)
    two = run_part(step_rank, 2, quick, 1)
    for name, value, unit in figures + one + one_thread + two:
        report(name, value, unit)
    t1, t1_thread, t2 = one[0][1], one_thread[0][1], two[0][1]
    report("ddp_2rank_speedup", t1 / t2, "x")
    report("ddp_2rank_scaling", t1_thread / t2, "x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
