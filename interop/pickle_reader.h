// The pickle reader: the bytes of pickle.dump (protocols 2 to 5) and libtorch's snapshot writer
// back to a PyValue, safely.
//
// read_pickle reads dict, list, tuple, int, float, str, bool and None, and refuses every opcode
// that imports, calls or builds an object: reading a pickle runs no code. Reading is linear in
// the input's length and builds a value whose size is proportional to it (a memoized object is
// shared, never copied). Errors are PickleError (interop/error.h), naming the opcode and its
// offset.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "interop/py_value.h"

namespace memgrad {

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
// nothing but EMPTY_LIST opcodes, would need about 95 bytes per byte: it is refused when the
// budget below runs out. Time: about 2 s for 100 MB (bench/pickle_bench.cpp).
PyValue read_pickle(std::string_view bytes);

// What read_pickle builds is bounded by its input: the values read take at most
// kPickleBudgetFactor times the input's bytes plus kPickleBudgetFloor (each value's slot and
// each str's and container's heap block counted, memo fetches shared); past it, a PickleError.
// A snapshot takes about 7 to 14 times its pickle; nothing but EMPTY_LIST opcodes, about 90.
inline constexpr size_t kPickleBudgetFactor = 24;
inline constexpr size_t kPickleBudgetFloor = size_t{64} << 20;

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
