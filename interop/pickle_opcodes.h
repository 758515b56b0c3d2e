// The pickle opcodes memgrad's codec names (pickle_writer.cpp and pickle_reader.cpp), their
// names, and why the reader refuses the ones it refuses.
//
// Values and names are Python's (Lib/pickle.py, Lib/pickletools.py). Only the opcodes of
// protocols 2 to 5 that carry None, bool, int, float, str, list, tuple and dict are read; the
// others are listed so a refusal can say what it refused and why. No memory of its own.
#pragma once

#include <cstdint>
#include <string_view>

namespace memgrad::detail {
namespace op {

// Read and written.
inline constexpr uint8_t kMark = '(';
inline constexpr uint8_t kStop = '.';
inline constexpr uint8_t kBinInt = 'J';   // 4-byte signed
inline constexpr uint8_t kBinInt1 = 'K';  // 1-byte unsigned
inline constexpr uint8_t kBinInt2 = 'M';  // 2-byte unsigned
inline constexpr uint8_t kNone = 'N';
inline constexpr uint8_t kBinUnicode = 'X';  // 4-byte length
inline constexpr uint8_t kAppend = 'a';
inline constexpr uint8_t kEmptyDict = '}';
inline constexpr uint8_t kAppends = 'e';
inline constexpr uint8_t kBinGet = 'h';
inline constexpr uint8_t kLongBinGet = 'j';
inline constexpr uint8_t kEmptyList = ']';
inline constexpr uint8_t kBinPut = 'q';
inline constexpr uint8_t kLongBinPut = 'r';
inline constexpr uint8_t kSetItem = 's';
inline constexpr uint8_t kTuple = 't';
inline constexpr uint8_t kEmptyTuple = ')';
inline constexpr uint8_t kSetItems = 'u';
inline constexpr uint8_t kBinFloat = 'G';  // 8-byte big-endian double
inline constexpr uint8_t kProto = 0x80;
inline constexpr uint8_t kTuple1 = 0x85;
inline constexpr uint8_t kTuple2 = 0x86;
inline constexpr uint8_t kTuple3 = 0x87;
inline constexpr uint8_t kNewTrue = 0x88;
inline constexpr uint8_t kNewFalse = 0x89;
inline constexpr uint8_t kLong1 = 0x8a;            // 1-byte length, little-endian two's complement
inline constexpr uint8_t kShortBinUnicode = 0x8c;  // 1-byte length
inline constexpr uint8_t kMemoize = 0x94;
inline constexpr uint8_t kFrame = 0x95;  // 8-byte length

// Read, never written (Python writes them; the viewer does not read all of them).
inline constexpr uint8_t kDict = 'd';
inline constexpr uint8_t kList = 'l';
inline constexpr uint8_t kLong4 = 0x8b;        // 4-byte signed length
inline constexpr uint8_t kBinUnicode8 = 0x8d;  // 8-byte length

// Refused: code, objects and extension registry.
inline constexpr uint8_t kGlobal = 'c';
inline constexpr uint8_t kStackGlobal = 0x93;
inline constexpr uint8_t kReduce = 'R';
inline constexpr uint8_t kBuild = 'b';
inline constexpr uint8_t kNewObj = 0x81;
inline constexpr uint8_t kNewObjEx = 0x92;
inline constexpr uint8_t kInst = 'i';
inline constexpr uint8_t kObj = 'o';
inline constexpr uint8_t kPersId = 'P';
inline constexpr uint8_t kBinPersId = 'Q';
inline constexpr uint8_t kExt1 = 0x82;
inline constexpr uint8_t kExt2 = 0x83;
inline constexpr uint8_t kExt4 = 0x84;
// Refused: bytes, buffers and Python 2 strings.
inline constexpr uint8_t kBinBytes = 'B';
inline constexpr uint8_t kShortBinBytes = 'C';
inline constexpr uint8_t kBinBytes8 = 0x8e;
inline constexpr uint8_t kByteArray8 = 0x96;
inline constexpr uint8_t kNextBuffer = 0x97;
inline constexpr uint8_t kReadonlyBuffer = 0x98;
inline constexpr uint8_t kString = 'S';
inline constexpr uint8_t kBinString = 'T';
inline constexpr uint8_t kShortBinString = 'U';
// Refused: sets.
inline constexpr uint8_t kEmptySet = 0x8f;
inline constexpr uint8_t kAddItems = 0x90;
inline constexpr uint8_t kFrozenSet = 0x91;
// Refused: protocol 0 text forms.
inline constexpr uint8_t kFloat = 'F';
inline constexpr uint8_t kInt = 'I';
inline constexpr uint8_t kLong = 'L';
inline constexpr uint8_t kUnicode = 'V';
inline constexpr uint8_t kGet = 'g';
inline constexpr uint8_t kPut = 'p';
// Refused: stack shuffles pickle.dump needs only for recursive structures.
inline constexpr uint8_t kPop = '0';
inline constexpr uint8_t kPopMark = '1';
inline constexpr uint8_t kDup = '2';

}  // namespace op

// Why the reader refuses `opcode` (one of the refused ones above, or a byte that is no opcode).
std::string_view refusal_reason(uint8_t opcode);

}  // namespace memgrad::detail

namespace memgrad {

// The name Python's pickletools gives an opcode byte ("BINUNICODE", "GLOBAL", ...), or "" for a
// byte that is not an opcode.
std::string_view pickle_opcode_name(uint8_t opcode);

}  // namespace memgrad
