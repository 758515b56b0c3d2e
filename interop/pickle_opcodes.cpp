// The opcode table both directions share: each opcode's name, and why the reader refuses one.
#include "interop/pickle_opcodes.h"

#include <array>
#include <utility>

namespace memgrad {
namespace detail {
namespace {

// clang-format off: the table keeps three opcodes per line.
constexpr std::array<std::pair<uint8_t, const char*>, 68> kOpcodeNames = {{
    {'(', "MARK"},
    {'.', "STOP"},
    {'0', "POP"},
    {'1', "POP_MARK"},
    {'2', "DUP"},
    {'F', "FLOAT"},
    {'I', "INT"},
    {'J', "BININT"},
    {'K', "BININT1"},
    {'L', "LONG"},
    {'M', "BININT2"},
    {'N', "NONE"},
    {'P', "PERSID"},
    {'Q', "BINPERSID"},
    {'R', "REDUCE"},
    {'S', "STRING"},
    {'T', "BINSTRING"},
    {'U', "SHORT_BINSTRING"},
    {'V', "UNICODE"},
    {'X', "BINUNICODE"},
    {'a', "APPEND"},
    {'b', "BUILD"},
    {'c', "GLOBAL"},
    {'d', "DICT"},
    {'}', "EMPTY_DICT"},
    {'e', "APPENDS"},
    {'g', "GET"},
    {'h', "BINGET"},
    {'i', "INST"},
    {'j', "LONG_BINGET"},
    {'l', "LIST"},
    {']', "EMPTY_LIST"},
    {'o', "OBJ"},
    {'p', "PUT"},
    {'q', "BINPUT"},
    {'r', "LONG_BINPUT"},
    {'s', "SETITEM"},
    {'t', "TUPLE"},
    {')', "EMPTY_TUPLE"},
    {'u', "SETITEMS"},
    {'G', "BINFLOAT"},
    {0x80, "PROTO"},
    {0x81, "NEWOBJ"},
    {0x82, "EXT1"},
    {0x83, "EXT2"},
    {0x84, "EXT4"},
    {0x85, "TUPLE1"},
    {0x86, "TUPLE2"},
    {0x87, "TUPLE3"},
    {0x88, "NEWTRUE"},
    {0x89, "NEWFALSE"},
    {0x8a, "LONG1"},
    {0x8b, "LONG4"},
    {'B', "BINBYTES"},
    {'C', "SHORT_BINBYTES"},
    {0x8c, "SHORT_BINUNICODE"},
    {0x8d, "BINUNICODE8"},
    {0x8e, "BINBYTES8"},
    {0x8f, "EMPTY_SET"},
    {0x90, "ADDITEMS"},
    {0x91, "FROZENSET"},
    {0x92, "NEWOBJ_EX"},
    {0x93, "STACK_GLOBAL"},
    {0x94, "MEMOIZE"},
    {0x95, "FRAME"},
    {0x96, "BYTEARRAY8"},
    {0x97, "NEXT_BUFFER"},
    {0x98, "READONLY_BUFFER"},
}};
// clang-format on

}  // namespace

std::string_view refusal_reason(uint8_t opcode) {
  switch (opcode) {
    case op::kGlobal:
    case op::kStackGlobal:
    case op::kReduce:
    case op::kBuild:
    case op::kNewObj:
    case op::kNewObjEx:
    case op::kInst:
    case op::kObj:
    case op::kPersId:
    case op::kBinPersId:
    case op::kExt1:
    case op::kExt2:
    case op::kExt4:
      return "it imports, calls or builds a Python object, which reading a pickle here never does";
    case op::kBinBytes:
    case op::kShortBinBytes:
    case op::kBinBytes8:
    case op::kByteArray8:
    case op::kNextBuffer:
    case op::kReadonlyBuffer:
    case op::kString:
    case op::kBinString:
    case op::kShortBinString: return "bytes and buffers are not part of the value model";
    case op::kEmptySet:
    case op::kAddItems:
    case op::kFrozenSet: return "sets are not part of the value model";
    case op::kFloat:
    case op::kInt:
    case op::kLong:
    case op::kUnicode:
    case op::kGet:
    case op::kPut: return "it is a protocol 0 text opcode, and only protocols 2 to 5 are read";
    case op::kPop:
    case op::kPopMark:
    case op::kDup: return "pickle.dump uses it only for recursive structures, which are not read";
    default: return "it is not a pickle opcode";
  }
}

}  // namespace detail

std::string_view pickle_opcode_name(uint8_t opcode) {
  for (const auto& [byte, name] : detail::kOpcodeNames) {
    if (byte == opcode) return name;
  }
  return "";
}

}  // namespace memgrad
