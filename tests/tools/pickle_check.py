"""Holds memgrad's pickle codec against Python's own pickle module (meson test, suite allocator).

usage: pickle_check.py PICKLE_TOOL

1. memgrad pickles a sample with protocols 2, 3 and 4: pickle.loads gives the value memgrad's
   JSON writer gives (tuples as lists, int keys as strings, as json.dumps writes them), and every
   opcode is one PyTorch's memory viewer (MemoryViz.js) reads, with LONG1 at most 8 bytes.
2. Python pickles values with protocols 2 to 5: memgrad reads them (its JSON is json.dumps') and
   writes them again byte for byte as pickle.dumps does (protocol 4 for a protocol 5 input).
3. Pickles of objects outside the value model are refused (exit 1) with the opcode named.
Prints one line per check and exits 1 at the first failure.
"""
import collections
import json
import os
import pickle
import pickletools
import subprocess
import sys
import tempfile

# The opcodes MemoryViz.js's unpickle() handles; anything else is "UNKNOWN OPCODE" there.
VIEWER_OPCODES = {
    "PROTO", "FRAME", "STOP", "MARK", "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "DICT", "LIST",
    "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "APPEND", "APPENDS", "SETITEM", "SETITEMS", "BININT",
    "BININT1", "BININT2", "LONG1", "BINUNICODE", "SHORT_BINUNICODE", "BINFLOAT", "NONE",
    "NEWTRUE", "NEWFALSE", "MEMOIZE", "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET",
}


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def as_json(value):
    """The value as json.dumps would write and json.loads read it back."""
    return json.loads(json.dumps(value))


def run(tool, *args):
    return subprocess.run([tool, *args], capture_output=True, text=True, check=False)


def check_viewer_opcodes(data, what):
    for opcode, arg, pos in pickletools.genops(data):
        if opcode.name not in VIEWER_OPCODES:
            fail(f"{what}: {opcode.name} at byte {pos} is not read by the memory viewer")
        if opcode.name == "PROTO" and not 2 <= arg <= 4:
            fail(f"{what}: protocol {arg}")
        if opcode.name == "LONG1" and not -2**63 <= arg < 2**63:
            fail(f"{what}: LONG1 {arg} is outside int64")


def python_values():
    """Values as Python builds them, each str used twice being the same object (as memo needs)."""
    shared = [1, 2, 3]
    frame = {"filename": "train.py", "line": 42, "name": "forward"}
    rich = {
        "none": None, "t": True, "f": False, "small": 7, "short": 65535, "neg": -1,
        "int32_min": -2**31, "big": 2**31, "bigger": 2**40 + 5, "max": 2**63 - 1,
        "min": -2**63, "float": 1.5, "negfloat": -0.25, "tiny": 5e-324,
        "text": "h\u00e9llo w\u00f6rld \u2713 \U0001F680",
        "empty_list": [], "empty_tuple": (), "empty_dict": {},
        "nested": [[1, (2, 3)], {"k": [4, 5, (6,)]}, (7, 8, 9, 10, 11)],
        "shared": [shared, shared, frame, frame], 7: "int key", -3: "negative key",
    }
    frames = [frame]
    actions = ["alloc", "free_requested", "free_completed"]
    trace = [{"action": actions[i % 3], "addr": 139637976727552 + 512 * i,
              "size": 512 * (i % 9 + 1), "stream": 0, "frames": frames} for i in range(5000)]
    big = {"device_traces": [trace], "segments": [], "by_id": {i: i * 3 for i in range(3000)},
           "long": "y" * 70000, "rich": rich}
    return {"rich": rich, "big": big}


def main():
    tool = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        for protocol in (2, 3, 4):
            path = os.path.join(tmp, f"sample{protocol}.pickle")
            result = run(tool, "sample", str(protocol), path)
            if result.returncode != 0:
                fail(f"pickle_tool sample {protocol}: {result.stderr}")
            with open(path, "rb") as f:
                data = f.read()
            check_viewer_opcodes(data, f"sample protocol {protocol}")
            if as_json(pickle.loads(data)) != json.loads(result.stdout):
                fail(f"sample protocol {protocol}: pickle.loads differs from memgrad's JSON")
            print(f"ok: memgrad's protocol {protocol} pickle loads in Python as its JSON says "
                  f"({len(data)} bytes, viewer opcodes only)")

        for name, value in python_values().items():
            for protocol in (2, 3, 4, 5):
                source = os.path.join(tmp, f"{name}{protocol}.pickle")
                with open(source, "wb") as f:
                    pickle.dump(value, f, protocol=protocol)
                result = run(tool, "json", source)
                if result.returncode != 0:
                    fail(f"pickle_tool json {name} {protocol}: {result.stderr}")
                if json.loads(result.stdout) != as_json(value):
                    fail(f"{name} protocol {protocol}: memgrad read another value")
                out_protocol = min(protocol, 4)
                copy = os.path.join(tmp, f"{name}{protocol}.copy")
                result = run(tool, "copy", source, str(out_protocol), copy)
                if result.returncode != 0:
                    fail(f"pickle_tool copy {name} {protocol}: {result.stderr}")
                with open(copy, "rb") as f:
                    written = f.read()
                if written != pickle.dumps(value, protocol=out_protocol):
                    fail(f"{name} protocol {protocol}: memgrad's protocol {out_protocol} bytes "
                         f"differ from pickle.dumps'")
                print(f"ok: Python's protocol {protocol} pickle of {name} reads, and writes back "
                      f"as pickle.dumps(protocol={out_protocol}) does")

        refused = [("a set", {1}, "EMPTY_SET"), ("bytes", b"ab", "SHORT_BINBYTES"),
                   ("an OrderedDict", collections.OrderedDict(), "GLOBAL")]
        for what, value, opcode in refused:
            path = os.path.join(tmp, "refused.pickle")
            with open(path, "wb") as f:
                pickle.dump(value, f, protocol=2 if opcode == "GLOBAL" else 4)
            result = run(tool, "json", path)
            if result.returncode != 1 or opcode not in result.stderr:
                fail(f"{what}: expected a refusal naming {opcode}, got {result.returncode}: "
                     f"{result.stderr.strip()}")
            print(f"ok: {what} is refused: {result.stderr.strip()}")


if __name__ == "__main__":
    main()
