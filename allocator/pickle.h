// A small, safe pickle codec for PyValue: PyTorch's memory snapshots are pickled dicts.
//
// write_pickle writes what CPython's pickle.dumps writes for the same value (protocols 2 to 4,
// byte for byte when equal strings are the same Python object), using only the opcodes the
// JavaScript viewer at pytorch.org/memory_viz understands. read_pickle reads what pickle.dump
// (protocols 2 to 5) and libtorch's snapshot writer produce for dict, list, tuple, int, float,
// str, bool and None, and refuses every opcode that imports, calls or builds an object: reading
// a pickle runs no code. Reading is linear in the input's length and builds a value whose size
// is proportional to it (a memoized object is shared, never copied).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "allocator/error.h"
#include "allocator/py_value.h"

namespace memgrad {

// A pickle that read_pickle cannot read, or a value write_pickle cannot write. `offset` is the
// byte offset of the opcode at fault (for the writer, the output length when it failed);
// `opcode` its byte, or -1 when no single opcode is at fault (empty input, bytes after STOP).
class PickleError : public Error {
 public:
  PickleError(std::string message, size_t offset, int opcode)
      : Error(std::move(message)), offset(offset), opcode(opcode) {}
  size_t offset;
  int opcode;
};

// The name Python's pickletools gives an opcode byte ("BINUNICODE", "GLOBAL", ...), or "" for a
// byte that is not an opcode.
std::string_view pickle_opcode_name(uint8_t opcode);

// `value` pickled with `protocol` (2, 3 or 4; libtorch writes 2, Python 3.8-3.13 4 by default).
// Uses PROTO, FRAME (protocol 4), MARK, STOP, EMPTY_DICT/LIST/TUPLE, TUPLE/TUPLE1/2/3,
// APPEND(S), SETITEM(S), BININT/BININT1/BININT2, LONG1 (at most 8 bytes), BINUNICODE,
// SHORT_BINUNICODE (protocol 4), BINFLOAT, NONE, NEWTRUE, NEWFALSE and the memo opcodes
// (BINPUT/LONG_BINPUT or MEMOIZE, BINGET/LONG_BINGET). Like CPython it memoizes every str, list,
// dict and non-empty tuple, so a shared object is written once and equal strings once.
// Throws ConfigError (key "protocol") for another protocol, PickleError for a str of 4 GiB or
// more. Allocates: the output, plus a memo table of one entry per container and distinct str.
std::string write_pickle(const PyValue& value, int protocol = 2);

// The value pickled in `bytes` (protocol 2 to 5, starting with PROTO and ending with STOP, with
// nothing after it). Throws PickleError naming the opcode and its offset for: an opcode outside
// the value model (GLOBAL, REDUCE, BUILD, BINBYTES, sets, protocol 0 text opcodes, ...), an
// unknown byte, truncated input, a stack underflow, a missing MARK, an undefined memo index, an
// int outside int64, a str that is not UTF-8, a dict key that is not str or int, a container
// nested deeper than kPyMaxDepth or modified after being placed in another (which only a
// recursive structure needs). Allocates: the value; while reading, a stack, one bit per memo
// index, and a 32-byte slot per index some GET reads back (the entry and its GETs to come): the
// memo holds an object only from its PUT to its last GET, never one no GET reads (CPython
// memoizes every str and container). A snapshot's trace as a tree takes about 390 bytes per
// event of six fields, which the pickle holds in about 57: 7 times the pickle's size (CPython's
// pickle.load needs about as much; the overload below streams it instead). The worst input,
// nothing but EMPTY_LIST opcodes, needs about 95 bytes per byte. Time: about 2 s for 100 MB
// (bench/pickle_bench.cpp).
PyValue read_pickle(std::string_view bytes);

// Takes the items of the lists inside one list of a pickled dict as read_pickle reads them (for
// a memory snapshot, the trace entries of device_traces[d]), instead of their lists: a caller
// can turn each item into something small as soon as it is complete, so the whole tree never
// exists at once.
class PickleItemSink {
 public:
  virtual ~PickleItemSink() = default;
  // The outermost dict's key whose value is the list of lists streamed ("device_traces").
  virtual std::string_view key() const = 0;
  // The next item of root[key()][list], complete: a container is sealed, as read_pickle returns
  // it. Called in the pickle's order, items of one list in their order. May throw; reading then
  // stops with that exception.
  virtual void take(size_t list, PyValue item) = 0;
};

// As read_pickle(bytes), with every item of root[sink.key()][i] handed to `sink` as it is read
// rather than kept: those lists come back empty. Which lists those are is decided while reading,
// from where each list is created (right after the key, or right above that list); the result
// is returned only when they turned out to be exactly root[key][i], each once (not fetched from
// the memo into a second place). Otherwise, which only a pickle shaped unlike those of Python
// and libtorch can cause, returns nullopt: the sink got items from elsewhere too, and the caller
// reads the pickle again without one. Throws as read_pickle does, at the same opcode with the
// same message (depths count the items the sink took). Allocates: as read_pickle, without the
// items taken.
std::optional<PyValue> read_pickle(std::string_view bytes, PickleItemSink& sink);

}  // namespace memgrad
