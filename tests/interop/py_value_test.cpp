// PyValue: construction checks, typed access with typed errors, dict key semantics, the depth
// limit, sharing between copies, and the JSON conversion (which writes what Python's json does).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "interop/py_value.h"

using namespace memgrad;

namespace {

// `depth` lists nested inside one another, the innermost holding 0.
PyValue nested_lists(int depth) {
  PyValue value = 0;
  for (int i = 0; i < depth; ++i) value = PyValue::list({value});
  return value;
}

}  // namespace

TEST_SUITE("interop") {

TEST_CASE("each kind reads back through its accessor and names itself as Python's type() does") {
  CHECK(PyValue().is_none());
  CHECK(PyValue(nullptr).kind_name() == "NoneType");
  CHECK(PyValue(true).as_bool());
  CHECK_EQ(PyValue(-5).as_int(), -5);
  CHECK_EQ(PyValue(uint64_t{1} << 62).as_int(), int64_t{1} << 62);
  CHECK_EQ(PyValue(0.5).as_float(), 0.5);
  CHECK_EQ(PyValue("h\u00e9").as_str(), "h\u00e9");
  CHECK(PyValue::list({1, 2}).kind_name() == "list");
  CHECK(PyValue::tuple({1, 2}).kind_name() == "tuple");
  CHECK(PyValue::dict({{"a", 1}}).kind_name() == "dict");
  CHECK_EQ(PyValue::tuple({1, "x"}).item(1).as_str(), "x");
  CHECK_EQ(PyValue::dict({{"a", 1}, {7, "seven"}}).at(7).as_str(), "seven");
}

TEST_CASE("an accessor of the wrong kind throws PyValueError naming what it expected and found") {
  try {
    (void)PyValue("text").as_int();
    FAIL("as_int() of a str did not throw");
  } catch (const PyValueError& e) {
    CHECK_EQ(e.expected, "int");
    CHECK_EQ(e.found, "str");
    CHECK(std::string(e.what()) == "PyValue: expected int, found str");
  }
  CHECK_THROWS_AS((void)PyValue(1).as_float(), PyValueError);  // no int -> float conversion
  CHECK_THROWS_AS((void)PyValue(1.0).as_int(), PyValueError);
  CHECK_THROWS_AS((void)PyValue(true).as_int(), PyValueError);
  CHECK_THROWS_AS((void)PyValue::list().at("key"), PyValueError);
  CHECK_THROWS_AS((void)PyValue::dict().items(), PyValueError);
}

TEST_CASE("a missing key or index throws PyValueError naming the keys present or the length") {
  const PyValue record = PyValue::dict({{"action", "alloc"}, {"addr", 4096}});
  CHECK(record.find("size") == nullptr);
  try {
    (void)record.at("size");
    FAIL("at() of a missing key did not throw");
  } catch (const PyValueError& e) {
    CHECK_EQ(e.expected, "key \"size\"");
    CHECK_EQ(e.found, "keys: action, addr");
  }
  try {
    (void)PyValue::list({1, 2}).item(2);
    FAIL("item() past the end did not throw");
  } catch (const PyValueError& e) {
    CHECK_EQ(e.expected, "an index below 2");
    CHECK_EQ(e.found, "index 2");
  }
}

TEST_CASE("an unsigned int above INT64_MAX and text that is not UTF-8 are refused") {
  CHECK_THROWS_WITH_AS(PyValue(uint64_t{1} << 63), doctest::Contains("9223372036854775808"),
                       PyValueError);
  CHECK_NOTHROW(PyValue(uint64_t{INT64_MAX}));
  CHECK_THROWS_WITH_AS(PyValue(std::string("ab\xff")), doctest::Contains("byte 0xff at offset 2"),
                       PyValueError);
  CHECK_THROWS_AS(PyValue(std::string("\xc0\x80")), PyValueError);          // overlong NUL
  CHECK_THROWS_AS(PyValue(std::string("\xed\xa0\x80")), PyValueError);      // a surrogate
  CHECK_THROWS_AS(PyValue(std::string("\xf4\x90\x80\x80")), PyValueError);  // above U+10FFFF
  CHECK_THROWS_AS(PyValue(std::string("\xe2\x9c")), PyValueError);          // cut short
  CHECK_NOTHROW(PyValue(std::string("\xf0\x9f\x9a\x80 \xe2\x9c\x93", 8)));
  CHECK_EQ(find_invalid_utf8(std::string_view("a\0b", 3)), std::string_view::npos);
}

TEST_CASE("a dict keeps insertion order, and a repeated key keeps its first place and last value") {
  const PyValue small = PyValue::dict({{"b", 1}, {"a", 2}, {"b", 3}, {1, 4}, {"1", 5}});
  REQUIRE_EQ(small.entries().size(), 4);
  CHECK_EQ(small.entries()[0].first.as_str(), "b");
  CHECK_EQ(small.at("b").as_int(), 3);
  CHECK_EQ(small.entries()[1].first.as_str(), "a");
  CHECK_EQ(small.at(1).as_int(), 4);  // the int key 1 and the str key "1" differ
  CHECK_EQ(small.at("1").as_int(), 5);

  // Large dicts find repeats by sorting rather than scanning: same result.
  PyValue::Entries entries;
  for (int i = 0; i < 120; ++i) entries.emplace_back(i % 40, i);
  const PyValue large = PyValue::dict(std::move(entries));
  REQUIRE_EQ(large.entries().size(), 40);
  for (int k = 0; k < 40; ++k) {
    CAPTURE(k);
    CHECK_EQ(large.entries()[k].first.as_int(), k);
    CHECK_EQ(large.entries()[k].second.as_int(), k + 80);  // the last of k, k+40, k+80
  }
}

TEST_CASE("a dict key must be a str or an int") {
  CHECK_THROWS_WITH_AS(PyValue::dict({{1.5, 1}}), doctest::Contains("found float"), PyValueError);
  CHECK_THROWS_AS(PyValue::dict({{PyValue::tuple({1}), 1}}), PyValueError);
  CHECK_THROWS_AS(PyValue::dict({{true, 1}}), PyValueError);
}

TEST_CASE("nesting is limited to kPyMaxDepth containers") {
  CHECK_EQ(PyValue(3).depth(), 0);
  CHECK_EQ(PyValue::list().depth(), 1);
  CHECK_EQ(PyValue::dict({{"a", PyValue::tuple({PyValue::list()})}}).depth(), 3);
  const PyValue deepest = nested_lists(kPyMaxDepth);
  CHECK_EQ(deepest.depth(), kPyMaxDepth);
  try {
    (void)PyValue::list({deepest});
    FAIL("nesting past the limit did not throw");
  } catch (const PyValueError& e) {
    CHECK_EQ(e.found, "depth 1001");
  }
}

TEST_CASE("copies share their node and compare equal; equal values built apart do not share") {
  const PyValue frames = PyValue::list({PyValue::dict({{"line", 3}})});
  const PyValue copy = frames;
  CHECK(copy.identity() == frames.identity());
  const PyValue twin = PyValue::list({PyValue::dict({{"line", 3}})});
  CHECK(twin.identity() != frames.identity());
  CHECK(twin == frames);
  CHECK(PyValue(1) != PyValue(1.0));  // unlike Python, kinds must match
  CHECK(PyValue::list({1}) != PyValue::tuple({1}));
  CHECK(PyValue(5).identity() == nullptr);
}

TEST_CASE("to_json writes tuples as arrays and int keys as strings, as Python's json does") {
  const PyValue value = PyValue::dict({
      {"pool", PyValue::tuple({0, 0})},
      {"sizes", PyValue::dict({{1, "one"}, {2, 2.5}})},
      {"flags", PyValue::list({true, false, nullptr})},
      {"text", "\u2713"},
  });
  const nlohmann::json expected = nlohmann::json::parse(
      R"({"pool": [0, 0], "sizes": {"1": "one", "2": 2.5}, "flags": [true, false, null],
          "text": "\u2713"})");
  CHECK(value.to_json() == expected);
}

TEST_CASE("from_json builds lists and dicts, and round-trips through to_json") {
  const nlohmann::json json = nlohmann::json::parse(
      R"({"segments": [{"address": 140000000000000, "blocks": [], "ratio": 0.25}],
          "device_traces": [[]], "name": null, "ok": true})");
  const PyValue value = PyValue::from_json(json);
  CHECK_EQ(value.at("segments").item(0).at("address").as_int(), 140000000000000);
  CHECK(value.at("segments").kind() == PyValue::Kind::List);
  CHECK(value.at("name").is_none());
  CHECK(value.to_json() == json);
}

TEST_CASE(
    "from_json keeps numbers above INT64_MAX as big ints and refuses nesting past the limit") {
  const PyValue big = PyValue::from_json(nlohmann::json::parse("[18446744073709551615]")).item(0);
  CHECK(big.kind() == PyValue::Kind::BigInt);
  CHECK_THROWS_AS((void)big.as_int(), PyValueError);
  CHECK_EQ(big.big_int_bytes(), std::string("\xff\xff\xff\xff\xff\xff\xff\xff\x00", 9));
  const std::string deep = std::string(kPyMaxDepth + 1, '[') + std::string(kPyMaxDepth + 1, ']');
  CHECK_THROWS_AS(PyValue::from_json(nlohmann::json::parse(deep)), PyValueError);
  const std::string limit = std::string(kPyMaxDepth, '[') + std::string(kPyMaxDepth, ']');
  CHECK_EQ(PyValue::from_json(nlohmann::json::parse(limit)).depth(), kPyMaxDepth);
}

}  // TEST_SUITE("interop")
