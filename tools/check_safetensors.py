#!/usr/bin/env python3
"""Validate a .safetensors file against the format's specification and list its tensors.

Usage: check_safetensors.py FILE [FILE ...]

The format (https://github.com/huggingface/safetensors):
  * 8 bytes: N, the header length, an unsigned little-endian 64-bit integer;
  * N bytes: a UTF-8 JSON object (it may be padded with trailing spaces). Each key is a tensor
    name mapping to {"dtype": ..., "shape": [...], "data_offsets": [begin, end]}, except the
    optional "__metadata__", a map of strings to strings;
  * the data: offsets are relative to its start; end - begin must be the tensor's byte size;
    the tensors must cover the data exactly, without holes or overlaps.

Prints "name dtype [shape]" per tensor. Uses only the standard library (struct, json). If the
`safetensors` package (and numpy) can be imported, the file is also loaded with it and every
tensor compared with what this checker read; BF16 tensors need ml_dtypes too (numpy's bfloat16).
`./memgrad test` runs it with .venv-tools/, which has all three.

Exit status: 0 when every file is valid, 1 when one is not, 2 on a usage error.
"""

import json
import struct
import sys

# Bytes per element of every dtype the specification names.
DTYPE_SIZES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}
MAX_HEADER_BYTES = 100 * 1000 * 1000  # the reference implementation's limit


class Invalid(Exception):
    """The file breaks the specification."""


def parse_header(blob):
    """Returns (header dict without __metadata__, metadata dict, data bytes)."""
    if len(blob) < 8:
        raise Invalid(f"{len(blob)} bytes: too short for the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > MAX_HEADER_BYTES:
        raise Invalid(f"header length {n} exceeds {MAX_HEADER_BYTES}")
    if 8 + n > len(blob):
        raise Invalid(f"header length {n} reaches beyond the file ({len(blob)} bytes)")
    text = blob[8:8 + n]
    if not text.startswith(b"{"):
        raise Invalid("the header does not start with '{'")
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise Invalid(f"the header is not UTF-8 JSON: {e}") from e
    if not isinstance(header, dict):
        raise Invalid("the header is not a JSON object")
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise Invalid("__metadata__ must map strings to strings")
    return header, metadata, blob[8 + n:]


def is_uint(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def check_entries(header, data_size):
    """Validates every entry; returns [(name, dtype, shape, begin, end)] in data order."""
    entries = []
    for name, e in header.items():
        if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
            raise Invalid(f"tensor {name!r}: need exactly dtype, shape and data_offsets")
        dtype, shape, offsets = e["dtype"], e["shape"], e["data_offsets"]
        if dtype not in DTYPE_SIZES:
            raise Invalid(f"tensor {name!r}: unknown dtype {dtype!r}")
        if not isinstance(shape, list) or not all(is_uint(s) for s in shape):
            raise Invalid(f"tensor {name!r}: shape must be a list of non-negative integers")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(is_uint(o) for o in offsets)):
            raise Invalid(f"tensor {name!r}: data_offsets must be two non-negative integers")
        begin, end = offsets
        numel = 1
        for s in shape:
            numel *= s
        if begin > end or end > data_size:
            raise Invalid(f"tensor {name!r}: offsets [{begin}, {end}) outside the "
                          f"{data_size} data bytes")
        if end - begin != numel * DTYPE_SIZES[dtype]:
            raise Invalid(f"tensor {name!r}: {dtype} {shape} needs {numel * DTYPE_SIZES[dtype]} "
                          f"bytes, its offsets span {end - begin}")
        entries.append((name, dtype, shape, begin, end))
    entries.sort(key=lambda t: (t[3], t[4]))
    covered = 0
    for name, _, _, begin, end in entries:
        if begin != covered:
            what = "overlaps the previous tensor" if begin < covered else "leaves a hole before it"
            raise Invalid(f"tensor {name!r} at offset {begin} {what} (expected {covered})")
        covered = end
    if covered != data_size:
        raise Invalid(f"the tensors cover {covered} of the {data_size} data bytes")
    return entries


def compare_with_library(path, entries, data):
    """Loads the file with the safetensors package, when present, and compares."""
    try:
        import numpy  # noqa: F401
        from safetensors.numpy import load_file
        if any(e[1] == "BF16" for e in entries):
            import ml_dtypes  # noqa: F401  (registers numpy's bfloat16)
    except ImportError:
        print("(the safetensors Python package is not installed: spec checks only)")
        return
    names = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16",
             "F16": "float16", "BF16": "bfloat16", "I32": "int32", "U32": "uint32", "F32": "float32",
             "I64": "int64", "U64": "uint64", "F64": "float64"}
    loaded = load_file(path)
    if set(loaded) != {e[0] for e in entries}:
        raise Invalid(f"safetensors loaded {sorted(loaded)}, the header names "
                      f"{sorted(e[0] for e in entries)}")
    for name, dtype, shape, begin, end in entries:
        array = loaded[name]
        if list(array.shape) != shape:
            raise Invalid(f"tensor {name!r}: safetensors gives shape {list(array.shape)}")
        if dtype in names and str(array.dtype) != names[dtype]:
            raise Invalid(f"tensor {name!r}: safetensors gives dtype {array.dtype}")
        if array.tobytes() != data[begin:end]:
            raise Invalid(f"tensor {name!r}: safetensors gives other bytes")
    print(f"safetensors {getattr(sys.modules.get('safetensors'), '__version__', '?')} "
          f"loads the same {len(entries)} tensors")


def check(path):
    with open(path, "rb") as f:
        blob = f.read()
    header, metadata, data = parse_header(blob)
    entries = check_entries(header, len(data))
    for name, dtype, shape, _, _ in entries:
        print(f"{name} {dtype} [{', '.join(str(s) for s in shape)}]")
    for key, value in sorted(metadata.items()):
        print(f"metadata {key} = {value!r}")
    compare_with_library(path, entries, data)


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    status = 0
    for path in argv[1:]:
        try:
            check(path)
            print(f"{path}: valid")
        except (Invalid, OSError) as e:
            print(f"{path}: INVALID: {e}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
