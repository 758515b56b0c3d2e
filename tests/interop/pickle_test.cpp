// The pickle codec against CPython: reading what pickle.dumps wrote (protocols 2 to 5), writing
// the same bytes it writes (protocols 2 to 4), round trips of every kind, and each malformed or
// refused input as a PickleError that names the opcode and its offset.
//
// The hex strings below were produced once by CPython 3.11's pickle.dumps (the command above
// each); CPython memoizes every str and container, and so does write_pickle, which is why the
// written bytes can be compared too.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "allocator/error.h"
#include "interop/error.h"
#include "interop/pickle_reader.h"
#include "interop/pickle_writer.h"
#include "interop/py_value.h"
#include "tests/interop/pickle_samples.h"

using namespace memgrad;
using namespace memgrad::pickle_samples;

namespace {

// What read_pickle(bytes) throws; fails the test when it throws nothing.
PickleError read_error(const std::string& bytes) {
  try {
    (void)read_pickle(bytes);
  } catch (const PickleError& e) {
    return e;
  }
  FAIL("read_pickle did not throw for ", to_hex(bytes));
  return PickleError("", 0, -1);
}

}  // namespace

TEST_SUITE("interop") {

TEST_CASE("a small dict reads back from CPython's bytes, and is written as CPython writes it") {
  // python3 -c "import pickle; print(pickle.dumps({'a': 1, 'b': [1, 2], 'c': (None, True)},
  //             protocol=P).hex())"
  const PyValue small = PyValue::dict(
      {{"a", 1}, {"b", PyValue::list({1, 2})}, {"c", PyValue::tuple({nullptr, true})}});
  const std::string p2 =
      "80027d71002858010000006171014b0158010000006271025d7103284b014b0265580100"
      "00006371044e88867105752e";
  const std::string p4 =
      "8004951f000000000000007d94288c0161944b018c0162945d94284b014b02658c016394"
      "4e888694752e";
  CHECK(read_pickle(from_hex(p2)) == small);
  CHECK(read_pickle(from_hex(p4)) == small);
  CHECK_EQ(to_hex(write_pickle(small, 2)), p2);
  CHECK_EQ(to_hex(write_pickle(small, 4)), p4);
}

TEST_CASE("scalars are written with CPython's opcodes for each range") {
  // python3 -c "import pickle; print(pickle.dumps(X, protocol=2).hex())" for each X
  const std::vector<std::pair<PyValue, std::string>> cases = {
      {0, "80024b002e"},
      {255, "80024bff2e"},
      {256, "80024d00012e"},
      {65535, "80024dffff2e"},
      {65536, "80024a000001002e"},
      {-1, "80024affffffff2e"},
      {int64_t{2147483647}, "80024affffff7f2e"},
      {int64_t{2147483648}, "80028a0500000080002e"},
      {int64_t{-2147483648}, "80024a000000802e"},
      {int64_t{-2147483649}, "80028a05ffffff7fff2e"},
      {INT64_MAX, "80028a08ffffffffffffff7f2e"},
      {INT64_MIN, "80028a0800000000000000802e"},
      {1.5, "8002473ff80000000000002e"},
      {-0.0, "80024780000000000000002e"},
      {"\u00e9", "80025802000000c3a971002e"},
      {true, "8002882e"},
      {nullptr, "80024e2e"},
  };
  for (const auto& [value, hex] : cases) {
    CAPTURE(hex);
    CHECK_EQ(to_hex(write_pickle(value, 2)), hex);
    CHECK(read_pickle(from_hex(hex)) == value);
  }
}

TEST_CASE("pickles CPython wrote with protocols 2 to 5 read as the value it pickled") {
  const PyValue expected = rich_value();
  for (const auto& [protocol, hex] : rich_pickles()) {
    CAPTURE(protocol);
    const PyValue value = read_pickle(from_hex(hex));
    CHECK(value == expected);
    // Memoized objects stay shared, as they were in Python.
    const PyValue& shared = value.at("shared");
    CHECK(shared.item(0).identity() == shared.item(1).identity());
    CHECK(shared.item(2).identity() == shared.item(3).identity());
    CHECK(value.at("nested").item(2).kind() == PyValue::Kind::Tuple);
  }
}

TEST_CASE("the writer produces CPython's exact bytes for a value with every kind and sharing") {
  const PyValue value = rich_value();
  for (const auto& [protocol, hex] : rich_pickles()) {
    if (protocol == 5) continue;  // written only up to 4: the viewer reads 2 to 4
    CAPTURE(protocol);
    CHECK_EQ(to_hex(write_pickle(value, protocol)), hex);
  }
}

TEST_CASE("every kind round-trips through the writer and reader for protocols 2, 3 and 4") {
  PyValue::Items long_list;  // more than one batch of 1000, and more than 256 memo entries
  for (int i = 0; i < 2500; ++i)
    long_list.push_back(i % 3 == 0 ? PyValue(std::to_string(i)) : PyValue(i));
  PyValue::Entries big_dict;
  for (int i = 0; i < 2000; ++i) big_dict.emplace_back(i, PyValue::tuple({i, -i}));
  const std::string long_text(70000, 'x');  // past CPython's 64 KiB frame target
  const PyValue value = PyValue::dict({
      {"rich", rich_value()},
      {"long_list", PyValue::list(std::move(long_list))},
      {"big_dict", PyValue::dict(std::move(big_dict))},
      {"long_text", long_text},
      {"again", long_text},
      {"tuples",
       PyValue::list({PyValue::tuple(), PyValue::tuple({1}), PyValue::tuple({1, 2, 3, 4, 5})})},
      {"floats", PyValue::list({0.1, -1e308, 5e-324, 1.0 / 0.0})},
  });
  for (int protocol : {2, 3, 4}) {
    CAPTURE(protocol);
    const PyValue back = read_pickle(write_pickle(value, protocol));
    CHECK(back == value);
    CHECK(back.at("long_text").identity() == back.at("again").identity());  // equal strings: one
  }
}

TEST_CASE("a value nested kPyMaxDepth deep is written and read back") {
  PyValue value = PyValue::dict({{"leaf", 1}});
  for (int i = 1; i < kPyMaxDepth; ++i)
    value = i % 2 ? PyValue::list({value}) : PyValue::tuple({value});
  REQUIRE_EQ(value.depth(), kPyMaxDepth);
  CHECK(read_pickle(write_pickle(value, 4)) == value);
}

TEST_CASE("write_pickle refuses protocols other than 2 to 4 with a ConfigError") {
  for (int protocol : {0, 1, 5}) {
    CAPTURE(protocol);
    try {
      (void)write_pickle(PyValue(1), protocol);
      FAIL("no error");
    } catch (const ConfigError& e) {
      CHECK_EQ(e.key, "protocol");
      CHECK_EQ(e.value, std::to_string(protocol));
    }
  }
}

TEST_CASE("opcodes that import, call or build objects are refused by name and offset") {
  for (const RefusedOpcode& refused : refused_opcodes()) {
    INFO(refused.name);
    // PROTO 2, then the opcode at byte 2 followed by enough bytes for any argument.
    const std::string bytes = std::string("\x80\x02", 2) + static_cast<char>(refused.byte) +
                              std::string(16, '\x01') + ".";
    const PickleError e = read_error(bytes);
    CHECK_EQ(e.offset, 2);
    CHECK_EQ(e.opcode, refused.byte);
    CHECK(std::string(e.what()).find(std::string(refused.name) + " (0x") != std::string::npos);
    CHECK(std::string(e.what()).find("refused") != std::string::npos);
  }
  // What CPython writes for objects outside the model:
  // collections.OrderedDict() (GLOBAL), b"ab" with protocol 3 (SHORT_BINBYTES), {1} (EMPTY_SET).
  CHECK_EQ(
      read_error(from_hex("800263636f6c6c656374696f6e730a4f726465726564446963740a7100295271012e"))
          .opcode,
      'c');
  CHECK_EQ(read_error(from_hex("80034302616271002e")).opcode, 'C');
  const PickleError set_error = read_error(from_hex("80049507000000000000008f94284b01902e"));
  CHECK_EQ(set_error.opcode, 0x8f);
  CHECK_EQ(set_error.offset, 11);
  CHECK(std::string(set_error.what()).find("EMPTY_SET") != std::string::npos);
}

TEST_CASE("malformed pickles are PickleErrors with the offset of the opcode at fault") {
  struct Case {
    const char* what;
    std::string hex;
    size_t offset;
    int opcode;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"empty input", "", 0, -1, "empty input"},
      {"no PROTO", "4e2e", 0, 'N', "starts with PROTO"},
      {"protocol 1", "80014e2e", 0, 0x80, "protocol 1"},
      {"protocol 6", "80064e2e", 0, 0x80, "protocol 6"},
      {"no STOP", "80024e", 3, -1, "before STOP"},
      {"truncated BININT", "80024a0102", 2, 'J', "needs 4 more bytes"},
      {"length past the end", "800258ffffffff41422e", 2, 'X', "needs 4294967295 more bytes"},
      {"frame past the end", "80049564000000000000004e2e", 2, 0x95, "a frame of 100 bytes"},
      {"stack underflow", "80025d612e", 3, 'a', "stack underflow"},
      {"tuple underflow", "80024e862e", 3, 0x86, "stack underflow"},
      {"MARK missing", "80025d4b01652e", 5, 'e', "no MARK is open"},
      {"nothing below MARK", "8002284b01652e", 5, 'e', "no list below the MARK"},
      {"APPEND to a dict", "80027d4b01612e", 5, 'a', "is a dict, not a list"},
      {"odd SETITEMS", "80027d284b01752e", 6, 'u', "do not pair"},
      {"memo undefined", "80026805", 2, 'h', "memo index 5 is not defined"},
      {"memo skips ahead", "80024e71032e", 3, 'q', "memo index 3 skips ahead"},
      {"negative LONG4 length", "80028bffffffff2e", 2, 0x8b, "negative length"},
      {"str not UTF-8", "80028c0261ff2e", 2, 0x8c, "not UTF-8 (byte 0xff at byte 5)"},
      {"list key",
       "80027d5d4b0173"
       "2e",
       6, 's', "a dict key of type list"},
      {"list in itself", "80025d71006800612e", 7, 'a', "inside itself"},
      {"two values at STOP", "80024e4e2e", 4, '.', "2 values on the stack"},
      {"bytes after STOP", "80024e2e00", 4, -1, "1 bytes after STOP"},
      {"PROTO again", "800280024e2e", 2, 0x80, "only at the start"},
      {"unknown opcode", "8002ff2e", 2, 0xff,
       "byte 0xff at byte 2: refused: it is not a pickle opcode"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const PickleError e = read_error(from_hex(c.hex));
    CHECK_EQ(e.offset, c.offset);
    CHECK_EQ(e.opcode, c.opcode);
    CHECK_MESSAGE(std::string(e.what()).find(c.message) != std::string::npos, e.what());
  }
}

TEST_CASE("a container changed after it was placed in another is refused (only cycles need it)") {
  // L = []; memo 0 = L; D = {"x": L}; then APPEND 1 to L through the memo.
  // 80 02 | 5d q00 | 7d 8c0178 h00 s | h00 4b01 a | ...
  const PickleError e =
      read_error(from_hex("80025d71007d8c0178680073680"
                          "04b01612e"));
  CHECK_EQ(e.opcode, 'a');
  CHECK(std::string(e.what()).find("already placed inside another container") != std::string::npos);
}

TEST_CASE("nesting deeper than kPyMaxDepth is refused, and kPyMaxDepth itself is read") {
  // EMPTY_LIST n times, then APPEND n-1 times: n lists nested.
  const auto nested = [](int n) {
    return std::string("\x80\x02", 2) + std::string(n, ']') + std::string(n - 1, 'a') + ".";
  };
  CHECK_EQ(read_pickle(nested(kPyMaxDepth)).depth(), kPyMaxDepth);
  const PickleError e = read_error(nested(kPyMaxDepth + 1));
  CHECK_EQ(e.opcode, 'a');
  CHECK(std::string(e.what()).find("nested deeper than 1000") != std::string::npos);
  CHECK(read_error(std::string("\x80\x02", 2) + std::string(kPyMaxDepth + 1, '(')).opcode == '(');
}

TEST_CASE("ints outside int64 are kept as big ints, read back and written as CPython writes them") {
  // CPython's pickle.dumps(2**64 - 1, 2), of 2**63, of -(2**63) - 1, and of 2**64 in LONG1.
  const char* big[] = {"80028a09ffffffffffffffff002e",
                       "80028a0900000000000000800"
                       "02e",
                       "80028a09ffffffffffffff7fff2e",
                       "80028a09000000000000000001"
                       "2e"};
  for (const char* hex : big) {
    INFO(hex);
    const PyValue v = read_pickle(from_hex(hex));
    CHECK(v.kind() == PyValue::Kind::BigInt);
    CHECK_EQ(v.big_int_bytes().size(), 9);
    CHECK_THROWS_AS((void)v.as_int(), PyValueError);
    CHECK_EQ(write_pickle(v, 2), from_hex(hex));
  }
  // Bytes past the eighth that only repeat the sign give an Int, as before.
  CHECK_EQ(read_pickle(from_hex("80028b0a000000feffffffffffffffffff2e")).as_int(), -2);
  // 2^64 - 1 through JSON: an unsigned number, both ways.
  const PyValue max = read_pickle(from_hex(big[0]));
  CHECK_EQ(max.to_json().dump(), "18446744073709551615");
  CHECK(PyValue::from_json(max.to_json()) == max);
  CHECK_THROWS_AS((void)read_pickle(from_hex(big[3])).to_json(), PyValueError);
}

TEST_CASE("what a pickle builds is bounded by its size: a pickle of empty lists is refused early") {
  // A list of n empty lists: 1 byte of input each, about 90 bytes built each.
  const auto empty_lists = [](size_t n) {
    return std::string("\x80\x02](", 4) + std::string(n, ']') + "e.";
  };
  const size_t n = 4 << 20;
  const std::string bomb = empty_lists(n);
  const size_t budget = kPickleBudgetFloor + kPickleBudgetFactor * bomb.size();
  const PickleError e = read_error(bomb);
  CHECK_EQ(e.opcode, ']');
  // Refused where the budget ran out, long before the end (each list is charged its slot and its
  // heap block, so at most budget / sizeof(PyValue) of them are read).
  CHECK_LT(e.offset, budget / sizeof(PyValue));
  CHECK_GT(e.offset, budget / 128);
  CHECK(std::string(e.what()).find(fmt::format("{} times the pickle's {} bytes plus 64 MiB",
                                               kPickleBudgetFactor, bomb.size())) !=
        std::string::npos);
  // The same shape below the budget reads, and so does a list of n Nones (24 bytes each).
  CHECK_EQ(read_pickle(empty_lists(100000)).items().size(), 100000);
  const std::string nones = std::string("\x80\x02](", 4) + std::string(n, 'N') + "e.";
  CHECK_EQ(read_pickle(nones).items().size(), n);
}

TEST_CASE(
    "opcodes CPython writes only for huge values are read too: LONG4, BINUNICODE8, LIST, DICT") {
  CHECK_EQ(read_pickle(from_hex("80028b02000000ff7f2e")).as_int(), 0x7fff);
  CHECK_EQ(read_pickle(from_hex("80028b0a000000feffffffffffffffffff2e")).as_int(), -2);
  CHECK_EQ(read_pickle(from_hex("80048d02000000000000006869"
                                "2e"))
               .as_str(),
           "hi");
  CHECK(read_pickle(from_hex("8002284b014b026c2e")) == PyValue::list({1, 2}));
  CHECK(read_pickle(from_hex("8002288c01614b01642e")) == PyValue::dict({{"a", 1}}));
  // SETITEM of a key twice keeps the first place and the last value, as Python's dict does.
  CHECK(read_pickle(from_hex("80027d284b014b024b034b044b014b0575"
                             "2e")) == PyValue::dict({{1, 5}, {3, 4}}));
}

}  // TEST_SUITE("interop")
