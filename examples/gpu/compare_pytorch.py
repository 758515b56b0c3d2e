#!/usr/bin/env python3
"""PyTorch's half of the GPU memory comparison (see compare_memgrad.cpp for memgrad's).

The same small programs, phase by phase, printing torch.cuda.memory_allocated /
memory_reserved / max_memory_allocated after each phase as JSON on stdout:
  B1   allocated vs reserved: a 64 MiB tensor allocated, freed, allocated again
  B2   empty_cache returns the cached segment
  B8   a deep MLP's saved activations, freed by backward
  B9   the same forward under no_grad saves nothing
  B13  checkpoint_sequential keeps only segment inputs
  B14  float16 autocast: half-size activations
  MLP  one training step of 784-512-512-10, batch 128, SGD with momentum
  STEP one AdamW step of the GPT-style transformer of memgrad's examples/charlm (12 blocks of
       width 768, 12 heads, context 1024, 86 characters, batch 8; --step-* flags), written
       layer for layer in tools/torch_charlm.py, next to memgrad's real run and its estimate
       on a meta device
and timings: float16 GEMM TFLOP/s at 4096^3 and 8192^3, the MLP step time, and the host time
of one op on 1-element tensors (c = a + b, and c = g * b + b recorded for backward).

    python3 examples/gpu/compare_pytorch.py --device cuda:0 > pytorch.json

Needs python3 and torch on a machine with a CUDA GPU.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from torch_charlm import charlm  # noqa: E402

DEEP_LAYERS = 8
DEEP = {"width": 2048, "batch": 512}  # --deep-width, --deep-batch


class Recorder:
    """Collects (behaviour, phase, allocated, reserved, max_allocated) records."""

    def __init__(self, torch, device):
        self.torch, self.device = torch, device
        self.behaviour = ""
        self.phases, self.timings, self.notes = [], {}, []

    def sync(self):
        self.torch.cuda.synchronize(self.device)

    def begin(self, behaviour):
        self.sync()
        self.torch.cuda.empty_cache()
        self.torch.cuda.reset_peak_memory_stats(self.device)
        self.behaviour = behaviour

    def phase(self, name):
        self.sync()
        cuda = self.torch.cuda
        self.phases.append({
            "behaviour": self.behaviour,
            "phase": name,
            "allocated": cuda.memory_allocated(self.device),
            "reserved": cuda.memory_reserved(self.device),
            "max_allocated": cuda.max_memory_allocated(self.device),
        })


def deep_mlp(torch, device):
    layers = []
    for _ in range(DEEP_LAYERS):
        layers += [torch.nn.Linear(DEEP["width"], DEEP["width"], device=device), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def b1_b2(torch, r, device):
    r.begin("B1")
    r.phase("start")
    x = torch.empty(16 * 1024 * 1024, device=device)  # 64 MiB
    r.phase("after alloc 64MiB")
    del x
    r.phase("after free")
    x = torch.empty(16 * 1024 * 1024, device=device)
    r.phase("after realloc 64MiB")
    del x
    r.begin("B2")
    x = torch.empty(16 * 1024 * 1024, device=device)
    del x
    r.phase("freed, before empty_cache")
    torch.cuda.empty_cache()
    r.phase("after empty_cache")


def b8_b9(torch, r, device):
    r.begin("B8")
    model = deep_mlp(torch, device)
    x = torch.randn(DEEP["batch"], DEEP["width"], device=device)
    r.phase("parameters and input")
    loss = model(x).sum()
    r.phase("after forward (saved activations)")
    loss.backward()
    r.phase("after backward (activations freed, grads kept)")
    del loss
    r.begin("B9")
    with torch.no_grad():
        y = model(x)
        r.phase("after forward under no_grad")
    del y
    r.phase("after the output is dropped")


def b13(torch, r, device):
    r.begin("B13")
    from torch.utils.checkpoint import checkpoint_sequential
    model = deep_mlp(torch, device)
    x = torch.randn(DEEP["batch"], DEEP["width"], device=device)
    r.phase("parameters and input")
    loss = checkpoint_sequential(model, 4, x, use_reentrant=False).sum()
    r.phase("after checkpointed forward (4 segments)")
    loss.backward()
    r.phase("after backward")


def b14(torch, r, device):
    r.begin("B14")
    model = deep_mlp(torch, device)
    x = torch.randn(DEEP["batch"], DEEP["width"], device=device)
    r.phase("parameters and input")
    with torch.autocast(device_type="cuda", dtype=torch.float16):
        loss = model(x).sum()
        r.phase("after float16 autocast forward")
    loss.backward()
    r.phase("after backward")


STEP = {"vocab": 86, "width": 768, "layers": 12, "heads": 12, "context": 1024, "batch": 8}


def transformer_step(torch, r, device):
    r.begin("STEP")
    model = charlm(torch, STEP["vocab"], STEP["width"], STEP["layers"], STEP["heads"],
                   STEP["context"]).to(device)
    adamw = torch.optim.AdamW(model.parameters(), weight_decay=0.01, foreach=False)
    shape = (STEP["batch"], STEP["context"])
    x = torch.randint(0, STEP["vocab"], shape, device=device)
    y = torch.randint(0, STEP["vocab"], shape, device=device)
    r.phase("parameters and batch")
    logits = model(x)
    loss = torch.nn.functional.cross_entropy(logits.view(-1, STEP["vocab"]), y.view(-1))
    del logits
    r.phase("after forward")
    loss.backward()
    del loss
    r.phase("after backward")
    adamw.step()
    r.phase("after optimizer step")
    adamw.zero_grad(set_to_none=True)
    r.phase("after zero_grad")
    del model, adamw, x, y
    r.phase("after the model is dropped (reserved: the cache)")


def mlp_step(torch, r, device, steps, timings):
    r.begin("MLP")
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10)).to(device)
    sgd = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(128, 784, device=device)
    y = torch.randint(0, 10, (128,), device=device)
    r.phase("parameters and batch")

    def step(record):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        if record:
            r.phase("after forward")
        loss.backward()
        if record:
            r.phase("after backward")
        sgd.step()
        if record:
            r.phase("after optimizer step")
        sgd.zero_grad(set_to_none=True)
        if record:
            r.phase("after zero_grad")

    step(True)
    if not timings:
        return
    for _ in range(10):
        step(False)
    ms = []
    for _ in range(steps):
        r.sync()
        t0 = time.perf_counter()
        step(False)
        r.sync()
        ms.append((time.perf_counter() - t0) * 1e3)
    r.timings["mlp_step_ms_median"] = statistics.median(ms)


def gemm_tflops(torch, r, device, n):
    a = torch.randn(n, n, device=device).half()
    b = torch.randn(n, n, device=device).half()
    for _ in range(2):
        a @ b
    best = 0.0
    for _ in range(10):
        r.sync()
        t0 = time.perf_counter()
        a @ b
        r.sync()
        best = max(best, 2.0 * n ** 3 / (time.perf_counter() - t0) / 1e12)
    r.timings[f"gemm_fp16_{n}_tflops"] = best


def one_element_overhead(torch, r, device):
    """The host time of one op on 1-element tensors (us per op): the median over 21 loops of
    1000, each ended by a synchronisation, after one untimed loop; c = a + b alone, and
    c = g * b + b with g requiring grad (two ops, recorded for backward: per op)."""
    a = torch.ones(1, device=device)
    b = torch.ones(1, device=device)
    g = torch.ones(1, device=device, requires_grad=True)

    def per_op_us(ops, ops_per_call):
        us = []
        for loop in range(22):
            r.sync()
            t0 = time.perf_counter()
            for _ in range(1000):
                c = ops()
            r.sync()
            if loop > 0:
                us.append((time.perf_counter() - t0) / (1000 * ops_per_call) * 1e6)
        return statistics.median(us)

    r.timings["add_1elem_overhead_us"] = per_op_us(lambda: a + b, 1)
    r.timings["autograd_mul_add_1elem_overhead_us"] = per_op_us(lambda: g * b + b, 2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--skip-timings", action="store_true")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--deep-width", type=int, default=2048)
    parser.add_argument("--deep-batch", type=int, default=512)
    for key in ("width", "layers", "heads", "context", "batch"):
        parser.add_argument(f"--step-{key}", type=int, default=STEP[key])
    args = parser.parse_args()
    DEEP["width"], DEEP["batch"] = args.deep_width, args.deep_batch
    for key in ("width", "layers", "heads", "context", "batch"):
        STEP[key] = getattr(args, f"step_{key}")
    try:
        import torch  # imported here so that --help and py_compile work without torch
    except ImportError as e:
        print(f"compare_pytorch: PyTorch is not importable with {sys.executable}: {e}",
              file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print(f"compare_pytorch: PyTorch {torch.__version__} (CUDA {torch.version.cuda}) sees no "
              f"CUDA device", file=sys.stderr)
        return 1
    # The defaults memgrad uses: float32 matrix products in float32 (no TF32).
    torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.device(args.device)
    torch.manual_seed(0)
    r = Recorder(torch, device)
    b1_b2(torch, r, device)
    b8_b9(torch, r, device)
    b13(torch, r, device)
    b14(torch, r, device)
    mlp_step(torch, r, device, max(args.steps, 1), not args.skip_timings)
    transformer_step(torch, r, device)
    if not args.skip_timings:
        gemm_tflops(torch, r, device, 4096)
        gemm_tflops(torch, r, device, 8192)
        one_element_overhead(torch, r, device)
    r.notes.append(torch.cuda.get_device_name(device))
    r.notes.append(f"torch {torch.__version__}")
    json.dump({"framework": "pytorch", "device": str(device), "phases": r.phases,
               "timings": r.timings, "notes": r.notes}, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
