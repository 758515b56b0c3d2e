// The pickle writer: PyValue to the bytes CPython's pickle.dumps writes.
//
// write_pickle writes what CPython's pickle.dumps writes for the same value (protocols 2 to 4,
// byte for byte when equal strings are the same Python object), using only the opcodes the
// JavaScript viewer at pytorch.org/memory_viz understands (PyTorch's memory snapshots are
// pickled dicts). interop/pickle_reader.h reads them back.
#pragma once

#include <string>

#include "interop/py_value.h"

namespace memgrad {

// `value` pickled with `protocol` (2, 3 or 4; libtorch writes 2, Python 3.8-3.13 4 by default).
// Uses PROTO, FRAME (protocol 4), MARK, STOP, EMPTY_DICT/LIST/TUPLE, TUPLE/TUPLE1/2/3,
// APPEND(S), SETITEM(S), BININT/BININT1/BININT2, LONG1 (at most 8 bytes), BINUNICODE,
// SHORT_BINUNICODE (protocol 4), BINFLOAT, NONE, NEWTRUE, NEWFALSE and the memo opcodes
// (BINPUT/LONG_BINPUT or MEMOIZE, BINGET/LONG_BINGET). Like CPython it memoizes every str, list,
// dict and non-empty tuple, so a shared object is written once and equal strings once.
// Throws ConfigError (key "protocol") for another protocol, PickleError for a str of 4 GiB or
// more. Allocates: the output, plus a memo table of one entry per container and distinct str.
std::string write_pickle(const PyValue& value, int protocol = 2);

}  // namespace memgrad
