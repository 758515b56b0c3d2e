// The pickle writer: write_pickle.
//
// The writer follows CPython's C pickler (Modules/_pickle.c) decision for decision, so its
// output can be compared byte for byte with pickle.dumps: the same integer opcodes by range,
// the same memo (every str, list, dict and non-empty tuple; a second sight is a BINGET), the
// same batches of 1000 items, and for protocol 4 the same 64 KiB frames, cut only between
// values. It writes into one growing buffer: the output's size, plus a memo table.
#include "interop/pickle_writer.h"

#include <bit>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

#include "interop/error.h"
#include "interop/pickle_opcodes.h"

namespace memgrad {
namespace {

using namespace detail;

// CPython's frame size: a frame is cut at the first value boundary past 64 KiB, and a str of
// 64 KiB or more is written outside any frame.
constexpr size_t kFrameSizeTarget = 64 * 1024;
// A frame shorter than this is written without its 9-byte header.
constexpr size_t kFrameSizeMin = 4;
// Items per APPENDS or SETITEMS, as CPython batches them.
constexpr size_t kBatchSize = 1000;

// Appends the low `nbytes` bytes of `value`, least significant first.
void append_le(std::string& out, uint64_t value, int nbytes) {
  for (int i = 0; i < nbytes; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}

class PickleWriter {
 public:
  explicit PickleWriter(int protocol) : protocol_(protocol), framing_(protocol >= 4) {}

  std::string write(const PyValue& value) {
    put(op::kProto);
    put(static_cast<uint8_t>(protocol_));
    if (framing_) commit_frame();
    save(value);
    put(op::kStop);
    commit_frame();
    return std::move(out_);
  }

 private:
  void put(uint8_t byte) { frame_.push_back(static_cast<char>(byte)); }
  void put_le(uint64_t value, int nbytes) { append_le(frame_, value, nbytes); }

  // Moves the frame written so far to the output, behind a FRAME header when framing (and the
  // frame is long enough to be worth one).
  void commit_frame() {
    if (frame_.empty()) return;
    if (framing_ && frame_.size() >= kFrameSizeMin) {
      out_.push_back(static_cast<char>(op::kFrame));
      append_le(out_, frame_.size(), 8);
    }
    if (out_.empty()) {
      out_.swap(frame_);  // without framing the whole pickle is one frame: no copy
    } else {
      out_ += frame_;
      frame_.clear();
    }
  }

  // Writes one value; a frame may end after it (never inside it).
  void save(const PyValue& value) {
    switch (value.kind()) {
      case PyValue::Kind::None: put(op::kNone); break;
      case PyValue::Kind::Bool: put(value.as_bool() ? op::kNewTrue : op::kNewFalse); break;
      case PyValue::Kind::Int: save_int(value.as_int()); break;
      case PyValue::Kind::BigInt: save_long(value.big_int_bytes()); break;
      case PyValue::Kind::Float: save_float(value.as_float()); break;
      case PyValue::Kind::Str: save_str(value.as_str()); break;
      case PyValue::Kind::List: save_list(value); break;
      case PyValue::Kind::Tuple: save_tuple(value); break;
      case PyValue::Kind::Dict: save_dict(value); break;
    }
    if (framing_ && frame_.size() >= kFrameSizeTarget) commit_frame();
  }

  void save_int(int64_t value) {
    if (value >= 0 && value <= 0xff) {
      put(op::kBinInt1);
      put_le(static_cast<uint64_t>(value), 1);
    } else if (value >= 0 && value <= 0xffff) {
      put(op::kBinInt2);
      put_le(static_cast<uint64_t>(value), 2);
    } else if (value >= INT32_MIN && value <= INT32_MAX) {
      put(op::kBinInt);
      put_le(static_cast<uint64_t>(value), 4);
    } else {
      // Little-endian two's complement in the fewest bytes that keep the sign: one more byte
      // than the magnitude's bits fill, less one when a negative number's top byte is only sign.
      const uint64_t magnitude =
          value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
      int nbytes = (std::bit_width(magnitude) >> 3) + 1;
      const auto byte_at = [&](int i) -> uint8_t {
        return i < 8 ? static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * i))
                     : (value < 0 ? 0xff : 0);
      };
      if (value < 0 && nbytes > 1 && byte_at(nbytes - 1) == 0xff &&
          (byte_at(nbytes - 2) & 0x80) != 0) {
        --nbytes;
      }
      put(op::kLong1);
      put(static_cast<uint8_t>(nbytes));
      for (int i = 0; i < nbytes; ++i) put(byte_at(i));
    }
  }

  // An int outside int64, from its bytes: LONG1 below 256 bytes, else LONG4.
  void save_long(const std::string& bytes) {
    if (bytes.size() < 256) {
      put(op::kLong1);
      put(static_cast<uint8_t>(bytes.size()));
    } else {
      put(op::kLong4);
      put_le(bytes.size(), 4);
    }
    for (char c : bytes) put(static_cast<uint8_t>(c));
  }

  void save_float(double value) {
    put(op::kBinFloat);
    const auto bits = std::bit_cast<uint64_t>(value);
    for (int i = 7; i >= 0; --i) put(static_cast<uint8_t>(bits >> (8 * i)));  // big-endian
  }

  void save_str(const std::string& text) {
    if (const auto hit = strings_.find(text); hit != strings_.end()) {
      get(hit->second);
      return;
    }
    std::string header;
    if (protocol_ >= 4 && text.size() < 256) {
      header = {static_cast<char>(op::kShortBinUnicode), static_cast<char>(text.size())};
    } else if (text.size() <= UINT32_MAX) {
      header.push_back(static_cast<char>(op::kBinUnicode));
      append_le(header, text.size(), 4);
    } else {
      throw PickleError(fmt::format("write_pickle: a str of {} bytes is too long: BINUNICODE holds "
                                    "less than 4 GiB (BINUNICODE8 is not read by PyTorch's viewer)",
                                    text.size()),
                        out_.size() + frame_.size(), op::kBinUnicode);
    }
    if (framing_ && text.size() >= kFrameSizeTarget) {
      commit_frame();  // a large str goes out unframed, after the frame written so far
      out_ += header;
      out_ += text;
    } else {
      frame_ += header;
      frame_ += text;
    }
    if (memo_size_ < UINT32_MAX) strings_.emplace(text, memo_size_);
    memoize();
  }

  void save_list(const PyValue& list) {
    if (save_memoized(list)) return;
    put(op::kEmptyList);
    memoize_node(list);
    const PyValue::Items& items = list.items();
    if (items.size() == 1) {
      save(items[0]);
      put(op::kAppend);
      return;
    }
    for (size_t begin = 0; begin < items.size(); begin += kBatchSize) {
      put(op::kMark);
      for (size_t i = begin; i < items.size() && i < begin + kBatchSize; ++i) save(items[i]);
      put(op::kAppends);
    }
  }

  void save_tuple(const PyValue& tuple) {
    const PyValue::Items& items = tuple.items();
    if (items.empty()) {
      put(op::kEmptyTuple);  // CPython does not memoize the empty tuple
      return;
    }
    if (save_memoized(tuple)) return;
    if (items.size() > 3) put(op::kMark);
    for (const PyValue& item : items) save(item);
    constexpr std::array<uint8_t, 4> kSmallTuple = {0, op::kTuple1, op::kTuple2, op::kTuple3};
    put(items.size() > 3 ? op::kTuple : kSmallTuple[items.size()]);
    memoize_node(tuple);
  }

  void save_dict(const PyValue& dict) {
    if (save_memoized(dict)) return;
    put(op::kEmptyDict);
    memoize_node(dict);
    const PyValue::Entries& entries = dict.entries();
    if (entries.size() == 1) {
      save(entries[0].first);
      save(entries[0].second);
      put(op::kSetItem);
      return;
    }
    if (entries.empty()) return;
    // Unlike lists, CPython ends a dict of a multiple of 1000 entries with an empty batch
    // (MARK SETITEMS); readers accept it, and writing it too keeps the bytes equal.
    size_t begin = 0;
    size_t batch = 0;
    do {
      put(op::kMark);
      for (batch = 0; batch < kBatchSize && begin + batch < entries.size(); ++batch) {
        save(entries[begin + batch].first);
        save(entries[begin + batch].second);
      }
      put(op::kSetItems);
      begin += batch;
    } while (batch == kBatchSize);
  }

  // Writes a BINGET when this container was written before; says whether it did.
  bool save_memoized(const PyValue& node) {
    const auto hit = memo_.find(node.identity());
    if (hit == memo_.end()) return false;
    get(hit->second);
    return true;
  }

  void memoize_node(const PyValue& node) {
    if (memo_size_ < UINT32_MAX) memo_.emplace(node.identity(), memo_size_);
    memoize();
  }

  // Stores the value on top of the stack as memo entry memo_size_.
  void memoize() {
    if (memo_size_ == UINT32_MAX) return;  // LONG_BINPUT's index is 4 bytes: stop sharing
    if (protocol_ >= 4) {
      put(op::kMemoize);
    } else if (memo_size_ < 256) {
      put(op::kBinPut);
      put_le(memo_size_, 1);
    } else {
      put(op::kLongBinPut);
      put_le(memo_size_, 4);
    }
    ++memo_size_;
  }

  void get(uint32_t index) {
    if (index < 256) {
      put(op::kBinGet);
      put_le(index, 1);
    } else {
      put(op::kLongBinGet);
      put_le(index, 4);
    }
  }

  int protocol_;
  bool framing_;
  std::string out_;                                 // committed output: PROTO, then whole frames
  std::string frame_;                               // the frame being written
  std::unordered_map<const void*, uint32_t> memo_;  // container node -> memo index
  std::unordered_map<std::string_view, uint32_t> strings_;  // str contents -> memo index
  uint32_t memo_size_ = 0;
};

}  // namespace

std::string write_pickle(const PyValue& value, int protocol) {
  if (protocol < 2 || protocol > 4) {
    throw ConfigError(fmt::format("write_pickle: protocol {} is not supported: memgrad writes "
                                  "protocols 2 to 4 (PyTorch's memory viewer reads 2 to 4)",
                                  protocol),
                      "protocol", std::to_string(protocol));
  }
  return PickleWriter(protocol).write(value);
}

}  // namespace memgrad
