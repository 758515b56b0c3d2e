// PyValue: a small tree of Python builtin values, the model behind memgrad's pickle codec.
//
// None, bool, int (int64), float (double), str (UTF-8), list, tuple and dict (str or int keys, in
// insertion order, as Python keeps them). An int outside int64 (a frame's line of 2^64 - 1 in a
// real snapshot) is kept as a BigInt, its bytes as the pickle has them: as_int() refuses it, so
// a reader that needs the number says so, and one that does not skips it. It lets memgrad write the
// memory snapshots PyTorch's viewer opens and read the ones PyTorch writes
// (interop/pickle_reader.h) without knowing anything about Python objects; it knows nothing about
// tensors either.
//
// Memory: a value is immutable once built. Copying one copies a reference: a str, list, tuple or
// dict lives in one reference-counted node that every copy shares (a value inside a container
// costs 24 bytes plus its node). A pickle's memo shares one object between many places; the
// reader keeps that sharing, so what it builds grows with the pickle, never with the pickle's
// expansion into a tree. Nesting is at most kPyMaxDepth containers deep, everywhere.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "allocator/error.h"

namespace memgrad {

// The deepest nesting of containers a PyValue may have (a list in a list is depth 2). Building,
// reading or converting anything deeper throws, so recursion over a value stays shallow.
inline constexpr int kPyMaxDepth = 1000;

// A PyValue that is not what the caller asked for: a wrong kind, a missing key, an index out of
// range, an int outside int64, text that is not UTF-8, nesting beyond kPyMaxDepth. `expected`
// and `found` say both sides, e.g. "int" and "str", or "key \"segments\"" and "keys: a, b".
class PyValueError : public Error {
 public:
  PyValueError(std::string expected, std::string found);
  std::string expected;
  std::string found;
};

// The offset of the first byte of `text` that is not part of valid UTF-8 (overlong forms,
// surrogates and code points above U+10FFFF are invalid, as Python's decoder says), or npos.
size_t find_invalid_utf8(std::string_view text);

namespace detail {
struct PySequence;
struct PyMapping;
struct PyBigInt;
class PickleReader;
}  // namespace detail

class PyValue {
 public:
  // Python's types; kind_name() spells them as Python's type() does.
  enum class Kind : uint8_t { None, Bool, Int, Float, Str, List, Tuple, Dict, BigInt };
  using Items = std::vector<PyValue>;                        // a list's or tuple's elements
  using Entries = std::vector<std::pair<PyValue, PyValue>>;  // a dict's (key, value) pairs

  // None. Allocates: nothing (nor do bool, int and float values).
  PyValue() = default;
  PyValue(std::nullptr_t) {}
  PyValue(bool value) : value_(value) {}
  PyValue(double value) : value_(value) {}
  // An int. Throws PyValueError for an unsigned value above INT64_MAX.
  template <std::integral T>
  requires(!std::same_as<T, bool> && !std::same_as<T, char>) PyValue(T value)
      : value_(checked_int(value)) {}
  // A str. Throws PyValueError when `text` is not UTF-8. Allocates: a node holding a copy.
  PyValue(std::string_view text);
  PyValue(const char* text) : PyValue(std::string_view(text)) {}
  PyValue(const std::string& text) : PyValue(std::string_view(text)) {}

  // A list, tuple or dict of the given elements, which it keeps (no copy of their nodes).
  // A dict's keys must be str or int; a repeated key keeps its first position and its last
  // value, as dict() does. Throws PyValueError for another key kind or nesting deeper than
  // kPyMaxDepth. Allocates: one node holding the vector.
  static PyValue list(Items items = {});
  static PyValue tuple(Items items = {});
  static PyValue dict(Entries entries = {});
  // An int from its little-endian two's complement bytes (a pickle's LONG1/LONG4 payload): an
  // Int when it fits int64, else a BigInt holding the bytes (trailing sign bytes dropped).
  static PyValue int_from_bytes(std::string_view little_endian);

  // The value's kind, and its name as Python's type() gives it: "NoneType", "bool", "int",
  // "float", "str", "list", "tuple" or "dict".
  Kind kind() const;
  std::string_view kind_name() const;
  bool is_none() const { return kind() == Kind::None; }

  // The value, when it is of that kind; otherwise PyValueError naming both kinds. No
  // conversions: as_float() of an int throws, as Python's typed fields would disagree too.
  bool as_bool() const;
  int64_t as_int() const;
  double as_float() const;
  const std::string& as_str() const;
  // A list's or tuple's elements.
  const Items& items() const;
  // A dict's entries, in insertion order.
  const Entries& entries() const;
  // A BigInt's bytes: little-endian two's complement, the fewest that keep the sign.
  const std::string& big_int_bytes() const;

  // A dict's value for a str or int key; PyValueError (naming the keys present) when absent.
  // Lookups scan the entries: dicts here are records of a few keys, not large maps.
  const PyValue& at(std::string_view key) const;
  const PyValue& at(int64_t key) const;
  // A dict's value for `key`, or nullptr when absent (PyValueError when this is not a dict).
  const PyValue* find(std::string_view key) const;
  const PyValue* find(int64_t key) const;
  // A list's or tuple's element; PyValueError when out of range.
  const PyValue& item(size_t index) const;

  // Containers nested here: 0 for a scalar or str, 1 for a list of scalars, ...
  int depth() const;
  // The node a str, list, tuple or dict shares with its copies, nullptr for other kinds: two
  // values with the same identity are the same object (Python's `is`).
  const void* identity() const;

  // The value as JSON, the way Python's json.dumps writes it: tuples become arrays, int keys
  // become strings. Unlike Python, NaN and infinities become null, and objects come out with
  // sorted keys (nlohmann::json keeps them in a std::map). A value shared in many places is
  // written in each place. Allocates: the JSON document.
  nlohmann::json to_json() const;
  // The JSON document as a value: arrays become lists, objects dicts (in nlohmann::json's key
  // order). Throws PyValueError for an unsigned number above INT64_MAX, binary data, or nesting
  // deeper than kPyMaxDepth.
  static PyValue from_json(const nlohmann::json& json);

  // Same kind and equal contents (an int never equals a float here, unlike in Python).
  friend bool operator==(const PyValue& a, const PyValue& b);

 private:
  friend class detail::PickleReader;  // fills containers in place while reading a pickle
  using Storage =
      std::variant<std::monostate, bool, int64_t, double, std::shared_ptr<const std::string>,
                   std::shared_ptr<detail::PySequence>, std::shared_ptr<detail::PyMapping>,
                   std::shared_ptr<const detail::PyBigInt>>;
  explicit PyValue(Storage value) : value_(std::move(value)) {}

  template <std::integral T>
  static int64_t checked_int(T value) {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t)) {
      if (value > static_cast<T>(std::numeric_limits<int64_t>::max())) throw_int_range(value);
    }
    return static_cast<int64_t>(value);
  }
  [[noreturn]] static void throw_int_range(uint64_t value);
  const detail::PySequence& sequence(const char* expected) const;
  const detail::PyMapping& mapping() const;
  [[noreturn]] void throw_kind(std::string expected) const;

  Storage value_;
};

namespace detail {

// A list's or tuple's elements, shared by every PyValue that refers to them.
struct PySequence {
  PyValue::Items items;
  int depth = 1;       // 1 + the deepest element's depth
  bool tuple = false;  // a tuple rather than a list
  bool open = false;   // still being filled by the pickle reader; false everywhere else
};

// A dict's entries, shared by every PyValue that refers to them.
struct PyBigInt {
  std::string bytes;  // little-endian two's complement, more than 8 bytes or outside int64
};

struct PyMapping {
  PyValue::Entries entries;
  int depth = 1;      // 1 + the deepest value's depth
  bool open = false;  // still being filled by the pickle reader; false everywhere else
};

// Makes a dict's keys unique the way Python's dict does: the first position, the last value.
// Throws PyValueError for a key that is not str or int. Linear in the entries.
void dedupe_keys(PyValue::Entries& entries);

}  // namespace detail
}  // namespace memgrad
