// Pickles CPython wrote, the value they hold, and the opcodes the reader refuses: shared by the
// codec's tests (pickle_test.cpp, pickle_fuzz_test.cpp). Header-only test data.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "interop/py_value.h"

namespace memgrad::pickle_samples {

inline std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

inline std::string to_hex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string hex;
  for (const char c : bytes) {
    hex.push_back(kDigits[static_cast<uint8_t>(c) >> 4]);
    hex.push_back(kDigits[static_cast<uint8_t>(c) & 0xf]);
  }
  return hex;
}

// The value below, as Python builds it:
//   shared = [1, 2, 3]
//   frame = {"filename": "train.py", "line": 42, "name": "forward"}
//   value = {"none": None, "t": True, "f": False, "small": 7, "short": 65535, "neg": -1,
//            "int32_min": -2**31, "big": 2**31, "bigger": 2**40 + 5, "max": 2**63 - 1,
//            "min": -2**63, "float": 1.5, "negfloat": -0.25,
//            "text": "h\u00e9llo w\u00f6rld \u2713 \U0001F680",
//            "empty_list": [], "empty_tuple": (), "empty_dict": {},
//            "nested": [[1, (2, 3)], {"k": [4, 5, (6,)]}, (7, 8, 9, 10)],
//            "shared": [shared, shared, frame, frame], 7: "int key", -3: "negative key"}
inline PyValue rich_value() {
  const PyValue shared = PyValue::list({1, 2, 3});
  const PyValue frame =
      PyValue::dict({{"filename", "train.py"}, {"line", 42}, {"name", "forward"}});
  return PyValue::dict({
      {"none", nullptr},
      {"t", true},
      {"f", false},
      {"small", 7},
      {"short", 65535},
      {"neg", -1},
      {"int32_min", int64_t{-2147483648}},
      {"big", int64_t{1} << 31},
      {"bigger", (int64_t{1} << 40) + 5},
      {"max", INT64_MAX},
      {"min", INT64_MIN},
      {"float", 1.5},
      {"negfloat", -0.25},
      {"text", "h\u00e9llo w\u00f6rld \u2713 \U0001F680"},
      {"empty_list", PyValue::list()},
      {"empty_tuple", PyValue::tuple()},
      {"empty_dict", PyValue::dict()},
      {"nested", PyValue::list({PyValue::list({1, PyValue::tuple({2, 3})}),
                                PyValue::dict({{"k", PyValue::list({4, 5, PyValue::tuple({6})})}}),
                                PyValue::tuple({7, 8, 9, 10})})},
      {"shared", PyValue::list({shared, shared, frame, frame})},
      {7, "int key"},
      {-3, "negative key"},
  });
}

// rich_value() pickled by CPython 3.11:
//   python3 -c "import pickle; print(pickle.dumps(value, protocol=P).hex())"
inline std::vector<std::pair<int, std::string>> rich_pickles() {
  return {
      {2,
       "80027d71002858040000006e6f6e6571014e5801000000747102885801000000667103895805000000736d61"
       "6c6c71044b07580500000073686f727471054dffff58030000006e656771064affffffff5809000000696e74"
       "33325f6d696e71074a00000080580300000062696771088a050000008000580600000062696767657271098a"
       "0605000000000158030000006d6178710a8a08ffffffffffffff7f58030000006d696e710b8a080000000000"
       "0000805805000000666c6f6174710c473ff800000000000058080000006e6567666c6f6174710d47bfd00000"
       "00000000580400000074657874710e581600000068c3a96c6c6f2077c3b6726c6420e29c9320f09f9a80710f"
       "580a000000656d7074795f6c69737471105d7111580b000000656d7074795f7475706c65711229580a000000"
       "656d7074795f6469637471137d711458060000006e657374656471155d7116285d7117284b014b024b038671"
       "18657d711958010000006b711a5d711b284b044b054b0685711c6573284b074b084b094b0a74711d65580600"
       "0000736861726564711e5d711f285d7120284b014b024b036568207d712128580800000066696c656e616d65"
       "71225808000000747261696e2e7079712358040000006c696e6571244b2a58040000006e616d657125580700"
       "0000666f72776172647126756821654b075807000000696e74206b657971274afdffffff580c0000006e6567"
       "6174697665206b65797128752e"},
      {3,
       "80037d71002858040000006e6f6e6571014e5801000000747102885801000000667103895805000000736d61"
       "6c6c71044b07580500000073686f727471054dffff58030000006e656771064affffffff5809000000696e74"
       "33325f6d696e71074a00000080580300000062696771088a050000008000580600000062696767657271098a"
       "0605000000000158030000006d6178710a8a08ffffffffffffff7f58030000006d696e710b8a080000000000"
       "0000805805000000666c6f6174710c473ff800000000000058080000006e6567666c6f6174710d47bfd00000"
       "00000000580400000074657874710e581600000068c3a96c6c6f2077c3b6726c6420e29c9320f09f9a80710f"
       "580a000000656d7074795f6c69737471105d7111580b000000656d7074795f7475706c65711229580a000000"
       "656d7074795f6469637471137d711458060000006e657374656471155d7116285d7117284b014b024b038671"
       "18657d711958010000006b711a5d711b284b044b054b0685711c6573284b074b084b094b0a74711d65580600"
       "0000736861726564711e5d711f285d7120284b014b024b036568207d712128580800000066696c656e616d65"
       "71225808000000747261696e2e7079712358040000006c696e6571244b2a58040000006e616d657125580700"
       "0000666f72776172647126756821654b075807000000696e74206b657971274afdffffff580c0000006e6567"
       "6174697665206b65797128752e"},
      {4,
       "8004959e010000000000007d94288c046e6f6e65944e8c017494888c016694898c05736d616c6c944b078c05"
       "73686f7274944dffff8c036e6567944affffffff8c09696e7433325f6d696e944a000000808c03626967948a"
       "0500000080008c06626967676572948a060500000000018c036d6178948a08ffffffffffffff7f8c036d696e"
       "948a0800000000000000808c05666c6f617494473ff80000000000008c086e6567666c6f61749447bfd00000"
       "000000008c0474657874948c1668c3a96c6c6f2077c3b6726c6420e29c9320f09f9a80948c0a656d7074795f"
       "6c697374945d948c0b656d7074795f7475706c6594298c0a656d7074795f64696374947d948c066e65737465"
       "64945d94285d94284b014b024b038694657d948c016b945d94284b044b054b0685946573284b074b084b094b"
       "0a7494658c06736861726564945d94285d94284b014b024b036568207d94288c0866696c656e616d65948c08"
       "747261696e2e7079948c046c696e65944b2a8c046e616d65948c07666f727761726494756821654b078c0769"
       "6e74206b6579944afdffffff8c0c6e65676174697665206b657994752e"},
      {5,
       "8005959e010000000000007d94288c046e6f6e65944e8c017494888c016694898c05736d616c6c944b078c05"
       "73686f7274944dffff8c036e6567944affffffff8c09696e7433325f6d696e944a000000808c03626967948a"
       "0500000080008c06626967676572948a060500000000018c036d6178948a08ffffffffffffff7f8c036d696e"
       "948a0800000000000000808c05666c6f617494473ff80000000000008c086e6567666c6f61749447bfd00000"
       "000000008c0474657874948c1668c3a96c6c6f2077c3b6726c6420e29c9320f09f9a80948c0a656d7074795f"
       "6c697374945d948c0b656d7074795f7475706c6594298c0a656d7074795f64696374947d948c066e65737465"
       "64945d94285d94284b014b024b038694657d948c016b945d94284b044b054b0685946573284b074b084b094b"
       "0a7494658c06736861726564945d94285d94284b014b024b036568207d94288c0866696c656e616d65948c08"
       "747261696e2e7079948c046c696e65944b2a8c046e616d65948c07666f727761726494756821654b078c0769"
       "6e74206b6579944afdffffff8c0c6e65676174697665206b657994752e"},
  };
}

struct RefusedOpcode {
  uint8_t byte;
  const char* name;
};

// Every opcode of protocols 0 to 5 outside the value model, with pickletools' name.
inline std::vector<RefusedOpcode> refused_opcodes() {
  return {
      {'c', "GLOBAL"},
      {0x93, "STACK_GLOBAL"},
      {'R', "REDUCE"},
      {'b', "BUILD"},
      {0x81, "NEWOBJ"},
      {0x92, "NEWOBJ_EX"},
      {'i', "INST"},
      {'o', "OBJ"},
      {'P', "PERSID"},
      {'Q', "BINPERSID"},
      {0x82, "EXT1"},
      {0x83, "EXT2"},
      {0x84, "EXT4"},
      {'B', "BINBYTES"},
      {'C', "SHORT_BINBYTES"},
      {0x8e, "BINBYTES8"},
      {0x96, "BYTEARRAY8"},
      {0x97, "NEXT_BUFFER"},
      {0x98, "READONLY_BUFFER"},
      {'S', "STRING"},
      {'T', "BINSTRING"},
      {'U', "SHORT_BINSTRING"},
      {0x8f, "EMPTY_SET"},
      {0x90, "ADDITEMS"},
      {0x91, "FROZENSET"},
      {'F', "FLOAT"},
      {'I', "INT"},
      {'L', "LONG"},
      {'V', "UNICODE"},
      {'g', "GET"},
      {'p', "PUT"},
      {'0', "POP"},
      {'1', "POP_MARK"},
      {'2', "DUP"},
  };
}

}  // namespace memgrad::pickle_samples
