#!/usr/bin/env python3
"""PyTorch's optimizers on the runs optim_test.cpp makes memgrad's take; prints the results.

Usage: torch_optim_reference.py CONFIG

Every run updates one parameter of 7 elements, starting at p0[j] = 0.5 - 0.13 j, from the
gradients g_k[j] = sin(0.37 k + 1.3 j) (1 + 0.1 j) of steps k = 1..steps, computed in float64 and
rounded to the gradient's dtype. A master-weights run keeps the parameter in float16 or bfloat16
and steps a float32 copy with the gradient converted to float32, writing the copy back rounded
(what memgrad's master_weights does, and what DeepSpeed's and Megatron's optimizers do).

Prints one line per element of the final parameter: float.hex of its value, then, for a
master-weights run, float.hex of the float32 master copy.
"""

import math
import sys

import torch

CONFIGS = {
    # name: (optimizer class, its arguments, dtype, master dtype or None, steps)
    "sgd": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
            torch.float32, None, 50),
    "nesterov": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
                 torch.float32, None, 50),
    "adam": (torch.optim.Adam, dict(lr=0.01, weight_decay=0.01), torch.float32, None, 50),
    "adamw": (torch.optim.AdamW, dict(lr=0.01), torch.float32, None, 50),  # weight decay 0.01
    "adam64": (torch.optim.Adam, dict(lr=0.01, betas=(0.8, 0.99)), torch.float64, None, 220),
    "master-bf16-adamw": (torch.optim.AdamW, dict(lr=0.01), torch.bfloat16, torch.float32, 50),
    "master-fp16-sgd": (torch.optim.SGD, dict(lr=0.05, momentum=0.9), torch.float16,
                        torch.float32, 50),
}

N = 7


def gradient(k, dtype):
    g = [math.sin(0.37 * k + 1.3 * j) * (1 + 0.1 * j) for j in range(N)]
    return torch.tensor(g, dtype=torch.float64).to(dtype)


def main(argv):
    if len(argv) != 2 or argv[1] not in CONFIGS:
        print(f"usage: {argv[0]} {'|'.join(CONFIGS)}", file=sys.stderr)
        return 2
    cls, kwargs, dtype, master_dtype, steps = CONFIGS[argv[1]]
    param = torch.tensor([0.5 - 0.13 * j for j in range(N)], dtype=torch.float64).to(dtype)
    stepped = param.to(master_dtype) if master_dtype else param
    stepped.requires_grad_(True)
    opt = cls([stepped], **kwargs)
    for k in range(1, steps + 1):
        stepped.grad = gradient(k, dtype).to(stepped.dtype)
        opt.step()
        if master_dtype:
            with torch.no_grad():
                param.copy_(stepped)
    for j in range(N):
        line = float(param[j]).hex()
        if master_dtype:
            line += " " + float(stepped[j]).hex()
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
