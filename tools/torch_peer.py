#!/usr/bin/env python3
"""Fetches the second benchmark peer: libtorch of PyTorch 2.x, from the torch wheel on PyPI.

usage: torch_peer.py fetch [--dest DIR]     (`./memgrad bench` runs it; prints DIR)
       torch_peer.py path                   (prints DIR; exits 1 when it is not fetched)

Debian's libtorch-dev is PyTorch 1.13. Users compare against PyTorch 2.x, whose libtorch ships
inside the torch wheel: torch/lib/libtorch_cpu.so and libc10.so, torch/include. This tool
downloads the pinned wheel with `pip download --no-deps` (about 540 MB, into DIR/wheels/, deleted
once extracted), keeps only what the peers link and include (about 500 MB), and adds the two
CUDA libraries libtorch_cpu.so needs at load time even on a CPU-only run (libcudart.so.13 and
libcupti.so.13, 14 MB from NVIDIA's wheels), so the peer runs the same on a machine with or
without the CUDA toolkit. Nothing is installed into any Python environment: the peers are C++
programs (bench/peer/) built against DIR by Meson (bench/meson.build) with DIR/lib as their
rpath.

DIR defaults to .peers/libtorch2/ in the repository; DIR/VERSION names the torch release, and a
DIR holding another release (or a half-finished extraction) is fetched again.
"""
import argparse
import os
import shutil
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DEST = os.path.join(ROOT, ".peers", "libtorch2")
TORCH = "2.15.0"
# The CUDA runtime and CUPTI of the release torch 2.15.0's wheel names (cuda-toolkit 13.2.2).
CUDA_WHEELS = ("nvidia-cuda-runtime==13.2.86", "nvidia-cuda-cupti==13.2.86")

# What is kept of each wheel: member prefix -> where it goes under DIR.
TORCH_MEMBERS = {
    "torch/include/": "include/",
    "torch/lib/libtorch_cpu.so": "lib/libtorch_cpu.so",
    "torch/lib/libc10.so": "lib/libc10.so",
    "torch/lib/libgomp.so.1": "lib/libgomp.so.1",  # the OpenMP libtorch_cpu.so was built with
}
CUDA_MEMBERS = {
    "nvidia/cu13/lib/libcudart.so.13": "lib/libcudart.so.13",
    "nvidia/cu13/lib/libcupti.so.13": "lib/libcupti.so.13",
}
NEEDED = ("lib/libtorch_cpu.so", "lib/libc10.so", "lib/libgomp.so.1", "lib/libcudart.so.13",
          "lib/libcupti.so.13", "include/torch/csrc/api/include/torch/torch.h")


def is_fetched(dest):
    try:
        with open(os.path.join(dest, "VERSION"), encoding="utf-8") as f:
            version = f.read().strip()
    except OSError:
        return False
    return version == TORCH and all(os.path.exists(os.path.join(dest, p)) for p in NEEDED)


def extract(wheel, members, dest):
    """Copies the members of `wheel` that `members` names (by prefix) under `dest`."""
    count = 0
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if info.is_dir():
                continue
            for prefix, target in members.items():
                if info.filename == prefix or (prefix.endswith("/")
                                               and info.filename.startswith(prefix)):
                    out = os.path.join(dest, target + info.filename[len(prefix):])
                    os.makedirs(os.path.dirname(out), exist_ok=True)
                    with z.open(info) as src, open(out, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                    count += 1
    return count


def pip_download(requirements, into):
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "--only-binary=:all:", "-q", "-d", into, *requirements]
    status = subprocess.run(cmd, check=False).returncode
    if status != 0:
        sys.exit(f"torch_peer: `{' '.join(cmd)}` failed with status {status} (is PyPI "
                 f"reachable? `./memgrad bench --peer 1.13` runs against Debian's libtorch only)")


def fetch(dest):
    if is_fetched(dest):
        return
    print(f"[torch_peer] fetching libtorch {TORCH} from PyPI's torch wheel into {dest} "
          f"(about 550 MB to download, once)", file=sys.stderr, flush=True)
    shutil.rmtree(dest, ignore_errors=True)
    wheels = os.path.join(dest, "wheels")
    os.makedirs(wheels)
    pip_download([f"torch=={TORCH}", *CUDA_WHEELS], wheels)
    for name in sorted(os.listdir(wheels)):
        members = TORCH_MEMBERS if name.startswith("torch-") else CUDA_MEMBERS
        if extract(os.path.join(wheels, name), members, dest) == 0:
            sys.exit(f"torch_peer: {name} holds none of {', '.join(members)}")
    shutil.rmtree(wheels)
    missing = [p for p in NEEDED if not os.path.exists(os.path.join(dest, p))]
    if missing:
        sys.exit(f"torch_peer: the wheels lacked {', '.join(missing)}")
    with open(os.path.join(dest, "VERSION"), "w", encoding="utf-8") as f:
        f.write(TORCH + "\n")


def main(argv):
    parser = argparse.ArgumentParser(prog="torch_peer.py", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("fetch", "path"))
    parser.add_argument("--dest", default=DEFAULT_DEST)
    args = parser.parse_args(argv)
    dest = os.path.abspath(args.dest)
    if args.action == "fetch":
        fetch(dest)
    elif not is_fetched(dest):
        print(f"torch_peer: libtorch {TORCH} is not fetched into {dest}", file=sys.stderr)
        return 1
    print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
