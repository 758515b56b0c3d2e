// PyValue's construction, typed access and JSON conversion.
//
// Containers are checked once, when built: their depth is stored in the node, so recursion over
// any value (JSON conversion, equality, the pickle writer) is bounded by kPyMaxDepth without
// further checks. Dict keys are made unique at construction the way Python's dict() does.
#include "interop/py_value.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace memgrad {
namespace {

// Dicts up to this size find repeated keys by scanning, which beats sorting; the snapshot's
// records have a dozen keys at most.
constexpr size_t kScanDedupeEntries = 16;

int max_depth(const PyValue::Items& items) {
  int depth = 0;
  for (const PyValue& item : items) depth = std::max(depth, item.depth());
  return depth;
}

void check_depth(int depth) {
  if (depth > kPyMaxDepth) {
    throw PyValueError(fmt::format("nesting at most {} containers deep", kPyMaxDepth),
                       fmt::format("depth {}", depth));
  }
}

bool is_key(const PyValue& key) {
  return key.kind() == PyValue::Kind::Str || key.kind() == PyValue::Kind::Int;
}

bool same_key(const PyValue& a, const PyValue& b) {
  if (a.kind() != b.kind()) return false;
  return a.kind() == PyValue::Kind::Str ? a.as_str() == b.as_str() : a.as_int() == b.as_int();
}

// Whether a dict small enough to scan has no repeated key (the common case, checked without
// allocating).
bool small_and_unique(const PyValue::Entries& entries) {
  if (entries.size() > kScanDedupeEntries) return false;
  for (size_t i = 1; i < entries.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (same_key(entries[j].first, entries[i].first)) return false;
    }
  }
  return true;
}

// Orders str keys after int keys, each by value.
bool key_less(const PyValue& a, const PyValue& b) {
  if (a.kind() != b.kind()) return a.kind() == PyValue::Kind::Int;
  return a.kind() == PyValue::Kind::Str ? a.as_str() < b.as_str() : a.as_int() < b.as_int();
}

// For each entry, the index of the first entry with the same key. Sorting, not hashing: keys
// come from files, and chosen keys can make a hash table quadratic, never a sort.
std::vector<size_t> first_with_same_key(const PyValue::Entries& entries) {
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return key_less(entries[a].first, entries[b].first);
  });
  std::vector<size_t> first(entries.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const bool repeat = i > 0 && same_key(entries[order[i - 1]].first, entries[order[i]].first);
    first[order[i]] = repeat ? first[order[i - 1]] : order[i];
  }
  return first;
}

// Up to ten of a dict's keys, for messages.
std::string key_list(const PyValue::Entries& entries) {
  if (entries.empty()) return "an empty dict";
  std::string text = "keys: ";
  for (size_t i = 0; i < entries.size() && i < 10; ++i) {
    const PyValue& key = entries[i].first;
    if (i > 0) text += ", ";
    text += key.kind() == PyValue::Kind::Str ? key.as_str() : std::to_string(key.as_int());
  }
  if (entries.size() > 10) text += fmt::format(", ... ({} in all)", entries.size());
  return text;
}

PyValue from_json_at(const nlohmann::json& json, int depth) {
  switch (json.type()) {
    case nlohmann::json::value_t::null: return {};
    case nlohmann::json::value_t::boolean: return json.get<bool>();
    case nlohmann::json::value_t::number_integer: return json.get<int64_t>();
    case nlohmann::json::value_t::number_unsigned: {
      const uint64_t n = json.get<uint64_t>();
      if (n <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return static_cast<int64_t>(n);
      }
      std::string bytes(9, '\0');  // a zero sign byte above the eight
      for (size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>(n >> (8 * i));
      return PyValue::int_from_bytes(bytes);
    }
    case nlohmann::json::value_t::number_float: return json.get<double>();
    case nlohmann::json::value_t::string: return json.get_ref<const std::string&>();
    case nlohmann::json::value_t::array: {
      check_depth(depth + 1);
      PyValue::Items items;
      items.reserve(json.size());
      for (const nlohmann::json& item : json) items.push_back(from_json_at(item, depth + 1));
      return PyValue::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      check_depth(depth + 1);
      PyValue::Entries entries;
      entries.reserve(json.size());
      for (const auto& [key, value] : json.items()) {
        entries.emplace_back(key, from_json_at(value, depth + 1));
      }
      return PyValue::dict(std::move(entries));
    }
    default:
      throw PyValueError("JSON null, boolean, number, string, array or object",
                         std::string("JSON ") + json.type_name());
  }
}

}  // namespace

PyValueError::PyValueError(std::string expected, std::string found)
    : Error(fmt::format("PyValue: expected {}, found {}", expected, found)),
      expected(std::move(expected)),
      found(std::move(found)) {}

size_t find_invalid_utf8(std::string_view text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char lead = bytes[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // The length of the sequence and the range its second byte must fall in: the narrower
    // ranges after E0, ED, F0 and F4 rule out overlong forms, surrogates and values above
    // U+10FFFF (the Unicode standard's table 3-7).
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      return i;
    }
    if (n - i < length || bytes[i + 1] < low || bytes[i + 1] > high) return i;
    for (size_t k = 2; k < length; ++k) {
      if (bytes[i + k] < 0x80 || bytes[i + k] > 0xBF) return i;
    }
    i += length;
  }
  return std::string_view::npos;
}

PyValue::PyValue(std::string_view text) {
  if (const size_t bad = find_invalid_utf8(text); bad != std::string_view::npos) {
    throw PyValueError("UTF-8 text", fmt::format("byte 0x{:02x} at offset {}",
                                                 static_cast<unsigned char>(text[bad]), bad));
  }
  value_ = std::make_shared<const std::string>(text);
}

void PyValue::throw_int_range(uint64_t value) {
  throw PyValueError("an int within int64", std::to_string(value));
}

PyValue PyValue::list(Items items) {
  const int depth = 1 + max_depth(items);
  check_depth(depth);
  return PyValue(std::make_shared<detail::PySequence>(
      detail::PySequence{std::move(items), depth, /*tuple=*/false, /*open=*/false}));
}

PyValue PyValue::tuple(Items items) {
  PyValue value = list(std::move(items));
  std::get<std::shared_ptr<detail::PySequence>>(value.value_)->tuple = true;
  return value;
}

PyValue PyValue::dict(Entries entries) {
  detail::dedupe_keys(entries);
  int depth = 0;
  for (const auto& entry : entries) depth = std::max(depth, entry.second.depth());
  check_depth(depth + 1);
  return PyValue(std::make_shared<detail::PyMapping>(
      detail::PyMapping{std::move(entries), depth + 1, /*open=*/false}));
}

PyValue::Kind PyValue::kind() const {
  switch (value_.index()) {
    case 0: return Kind::None;
    case 1: return Kind::Bool;
    case 2: return Kind::Int;
    case 3: return Kind::Float;
    case 4: return Kind::Str;
    case 5:
      return std::get<std::shared_ptr<detail::PySequence>>(value_)->tuple ? Kind::Tuple
                                                                          : Kind::List;
    case 6: return Kind::Dict;
    default: return Kind::BigInt;
  }
}

std::string_view PyValue::kind_name() const {
  switch (kind()) {
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::Str: return "str";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
    case Kind::BigInt: return "big int";  // an int outside int64
  }
  return "?";
}

void PyValue::throw_kind(std::string expected) const {
  throw PyValueError(std::move(expected), std::string(kind_name()));
}

bool PyValue::as_bool() const {
  if (const bool* value = std::get_if<bool>(&value_)) return *value;
  throw_kind("bool");
}

int64_t PyValue::as_int() const {
  if (const int64_t* value = std::get_if<int64_t>(&value_)) return *value;
  throw_kind("int");
}

PyValue PyValue::int_from_bytes(std::string_view little_endian) {
  std::string bytes(little_endian);
  if (bytes.empty()) return int64_t{0};
  const bool negative = (static_cast<uint8_t>(bytes.back()) & 0x80) != 0;
  const char sign = negative ? '\xff' : '\x00';
  // Drop sign bytes the byte below them repeats.
  while (bytes.size() > 1 && bytes.back() == sign &&
         ((static_cast<uint8_t>(bytes[bytes.size() - 2]) & 0x80) != 0) == negative) {
    bytes.pop_back();
  }
  if (bytes.size() <= 8) {
    uint64_t value = negative ? ~uint64_t{0} : 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
      value &= ~(uint64_t{0xff} << (8 * i));
      value |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
    }
    return static_cast<int64_t>(value);
  }
  return PyValue(Storage(std::make_shared<const detail::PyBigInt>(detail::PyBigInt{bytes})));
}

const std::string& PyValue::big_int_bytes() const {
  if (const auto* node = std::get_if<std::shared_ptr<const detail::PyBigInt>>(&value_)) {
    return (*node)->bytes;
  }
  throw_kind("int outside int64");
}

double PyValue::as_float() const {
  if (const double* value = std::get_if<double>(&value_)) return *value;
  throw_kind("float");
}

const std::string& PyValue::as_str() const {
  if (const auto* node = std::get_if<std::shared_ptr<const std::string>>(&value_)) return **node;
  throw_kind("str");
}

const detail::PySequence& PyValue::sequence(const char* expected) const {
  if (const auto* node = std::get_if<std::shared_ptr<detail::PySequence>>(&value_)) return **node;
  throw_kind(expected);
}

const detail::PyMapping& PyValue::mapping() const {
  if (const auto* node = std::get_if<std::shared_ptr<detail::PyMapping>>(&value_)) return **node;
  throw_kind("dict");
}

const PyValue::Items& PyValue::items() const { return sequence("list or tuple").items; }

const PyValue::Entries& PyValue::entries() const { return mapping().entries; }

const PyValue* PyValue::find(std::string_view key) const {
  for (const auto& [k, v] : mapping().entries) {
    if (k.kind() == Kind::Str && k.as_str() == key) return &v;
  }
  return nullptr;
}

const PyValue* PyValue::find(int64_t key) const {
  for (const auto& [k, v] : mapping().entries) {
    if (k.kind() == Kind::Int && k.as_int() == key) return &v;
  }
  return nullptr;
}

const PyValue& PyValue::at(std::string_view key) const {
  if (const PyValue* value = find(key)) return *value;
  throw PyValueError(fmt::format("key \"{}\"", key), key_list(mapping().entries));
}

const PyValue& PyValue::at(int64_t key) const {
  if (const PyValue* value = find(key)) return *value;
  throw PyValueError(fmt::format("key {}", key), key_list(mapping().entries));
}

const PyValue& PyValue::item(size_t index) const {
  const Items& items = sequence("list or tuple").items;
  if (index < items.size()) return items[index];
  throw PyValueError(fmt::format("an index below {}", items.size()),
                     fmt::format("index {}", index));
}

int PyValue::depth() const {
  if (const auto* node = std::get_if<std::shared_ptr<detail::PySequence>>(&value_)) {
    return (*node)->depth;
  }
  if (const auto* node = std::get_if<std::shared_ptr<detail::PyMapping>>(&value_)) {
    return (*node)->depth;
  }
  return 0;
}

const void* PyValue::identity() const {
  if (const auto* node = std::get_if<std::shared_ptr<const detail::PyBigInt>>(&value_)) {
    return node->get();
  }
  if (const auto* node = std::get_if<std::shared_ptr<const std::string>>(&value_)) {
    return node->get();
  }
  if (const auto* node = std::get_if<std::shared_ptr<detail::PySequence>>(&value_)) {
    return node->get();
  }
  if (const auto* node = std::get_if<std::shared_ptr<detail::PyMapping>>(&value_)) {
    return node->get();
  }
  return nullptr;
}

nlohmann::json PyValue::to_json() const {
  switch (kind()) {
    case Kind::None: return nullptr;
    case Kind::Bool: return as_bool();
    case Kind::Int: return as_int();
    case Kind::BigInt: {
      // JSON (nlohmann's) holds up to 2^64 - 1: a non-negative BigInt of 8 bytes and a sign byte.
      const std::string& bytes = big_int_bytes();
      if (bytes.size() == 9 && bytes[8] == '\0') {
        uint64_t n = 0;
        for (size_t i = 0; i < 8; ++i) n |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
        return n;
      }
      throw PyValueError("an int JSON can hold (-2^63 to 2^64 - 1)",
                         fmt::format("an int of {} bytes", bytes.size()));
    }
    case Kind::Float: return as_float();
    case Kind::Str: return as_str();
    case Kind::List:
    case Kind::Tuple: {
      nlohmann::json array = nlohmann::json::array();
      for (const PyValue& item : items()) array.push_back(item.to_json());
      return array;
    }
    case Kind::Dict: {
      nlohmann::json object = nlohmann::json::object();
      for (const auto& [key, value] : entries()) {
        const std::string name =
            key.kind() == Kind::Str ? key.as_str() : std::to_string(key.as_int());
        object[name] = value.to_json();
      }
      return object;
    }
  }
  return nullptr;
}

PyValue PyValue::from_json(const nlohmann::json& json) { return from_json_at(json, 0); }

bool operator==(const PyValue& a, const PyValue& b) {
  if (a.kind() != b.kind()) return false;
  if (a.identity() != nullptr && a.identity() == b.identity()) return true;
  switch (a.kind()) {
    case PyValue::Kind::None: return true;
    case PyValue::Kind::Bool: return a.as_bool() == b.as_bool();
    case PyValue::Kind::Int: return a.as_int() == b.as_int();
    case PyValue::Kind::BigInt: return a.big_int_bytes() == b.big_int_bytes();
    case PyValue::Kind::Float: return a.as_float() == b.as_float();
    case PyValue::Kind::Str: return a.as_str() == b.as_str();
    case PyValue::Kind::List:
    case PyValue::Kind::Tuple: return a.items() == b.items();
    case PyValue::Kind::Dict: return a.entries() == b.entries();
  }
  return false;
}

namespace detail {

void dedupe_keys(PyValue::Entries& entries) {
  for (const auto& entry : entries) {
    if (!is_key(entry.first)) {
      throw PyValueError("a str or int dict key", std::string(entry.first.kind_name()));
    }
  }
  if (small_and_unique(entries)) return;
  const std::vector<size_t> first = first_with_same_key(entries);
  // A first occurrence moves down to `kept`; a later one hands its value to the first.
  std::vector<size_t> position(entries.size());
  size_t kept = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (first[i] == i) {
      position[i] = kept;
      if (kept != i) entries[kept] = std::move(entries[i]);
      ++kept;
    } else {
      entries[position[first[i]]].second = std::move(entries[i].second);
    }
  }
  entries.resize(kept);
}

}  // namespace detail
}  // namespace memgrad
