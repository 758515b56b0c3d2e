// The pickle reader: a stack machine over the opcodes of protocols 2 to 5 that build None, bool,
// int, float, str, list, tuple and dict, and nothing else (read_pickle in interop/pickle_reader.h).
//
// Every length is checked against the bytes left before anything is read or allocated, so a
// corrupt pickle is a PickleError and never a crash. Each opcode costs time in proportion to
// its own bytes or to the stack entries it consumes (each pushed by an earlier opcode), so
// reading is linear. A memoized object is pushed again by reference, never copied.
//
// Containers are filled in place (pickle.dump memoizes a list before writing its items), so a
// list or dict stays open until it is placed inside another container, and is then sealed: no
// later opcode may change it. pickle.dump never changes a placed container for acyclic data;
// sealing rules out cycles (closing one would need to add to a sealed container) and makes
// depths exact at no cost (an open container is no one's child, so filling it changes no other
// depth).
//
// The memo keeps only what a GET reads back, and only until its last GET. CPython's pickler
// memoizes every str and container whether or not it is ever fetched again, and a memo that held
// them all would keep every object of the pickle alive to the end. A first pass over the
// opcodes, building nothing, counts the GETs of each memo index; the second pass stores only the
// indices with GETs to come, and drops an entry at its last GET.
//
// With a sink, the items of the lists that will be root[key][i] go to the sink as each is
// placed, instead of into their list. Which lists those are is guessed when a list is created,
// from the stack below it: the pickler is inside the value it writes, so a dict's value follows
// its key, and a list's items follow the list or the MARK above it. The guess is checked once
// the value is complete (the lists must be there, and nowhere else), and a wrong one makes the
// caller read again without a sink: the guess changes what is kept, never what is read.

#include "interop/pickle_reader.h"

#include <algorithm>
#include <bit>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "interop/error.h"
#include "interop/pickle_opcodes.h"

namespace memgrad::detail {
namespace {

// The memo indices a pickle's GET opcodes read, found without building anything, and how many
// GETs read each: a bitmap with the rank of each set bit, so the indices read back number a
// dense table of slots.
class MemoReads {
 public:
  // Scans `in` twice from its first opcode to STOP, or to the first opcode the reader would
  // refuse or find truncated (nothing after it runs). Linear; allocates one bit per memo index
  // and 8 bytes per index read back.
  explicit MemoReads(std::string_view in);

  // Whether some GET reads memo index `index`, and if so its slot in a table of count() slots.
  bool read_back(uint64_t index) const {
    return index / 64 < bits_.size() && (bits_[index / 64] >> (index % 64) & 1) != 0;
  }
  size_t slot(uint64_t index) const {
    const uint64_t below = bits_[index / 64] & ((uint64_t{1} << (index % 64)) - 1);
    return ranks_[index / 64] + static_cast<size_t>(std::popcount(below));
  }
  size_t count() const { return count_; }
  // The GETs of a slot still to come; read() counts one down and says whether it was the last.
  uint64_t reads_left(size_t slot) const { return reads_[slot]; }
  bool read(size_t slot) { return --reads_[slot] == 0; }

 private:
  // Calls mark (first scan) or counts a read (second scan) for each GET's index.
  void scan(std::string_view in, bool count_reads);
  void mark(uint64_t index) {
    if (index / 64 >= bits_.size()) bits_.resize(index / 64 + 1);
    bits_[index / 64] |= uint64_t{1} << (index % 64);
  }

  std::vector<uint64_t> bits_;   // bit i: memo index i is read back
  std::vector<size_t> ranks_;    // set bits in the words before each word
  size_t count_ = 0;             // set bits in all
  std::vector<uint64_t> reads_;  // per slot, the GETs that read it
};

MemoReads::MemoReads(std::string_view in) {
  scan(in, /*count_reads=*/false);
  ranks_.resize(bits_.size());
  for (size_t word = 0; word < bits_.size(); ++word) {
    ranks_[word] = count_;
    count_ += static_cast<size_t>(std::popcount(bits_[word]));
  }
  reads_.resize(count_);
  scan(in, /*count_reads=*/true);
}

void MemoReads::scan(std::string_view in, bool count_reads) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(in.data());
  const size_t size = in.size();
  // The little-endian integer of `nbytes` bytes at `at`, or nullopt past the end.
  const auto le = [&](size_t at, size_t nbytes) -> std::optional<uint64_t> {
    if (at > size || size - at < nbytes) return std::nullopt;
    uint64_t value = 0;
    for (size_t i = 0; i < nbytes; ++i) value |= uint64_t{bytes[at + i]} << (8 * i);
    return value;
  };
  uint64_t puts = 0;  // PUT opcodes so far: the memo holds at most that many entries
  size_t pos = 2;     // after PROTO and its argument
  while (pos < size) {
    const uint8_t op = bytes[pos++];
    size_t width = 0;                  // bytes of the argument
    std::optional<uint64_t> data = 0;  // bytes of data after the argument (str, LONG1/4)
    // clang-format off: one line per group of opcodes that read alike.
    switch (op) {
      case op::kMark:
      case op::kNone:
      case op::kNewTrue:
      case op::kNewFalse:
      case op::kEmptyList:
      case op::kEmptyDict:
      case op::kEmptyTuple:
      case op::kList:
      case op::kDict:
      case op::kTuple:
      case op::kTuple1:
      case op::kTuple2:
      case op::kTuple3:
      case op::kAppend:
      case op::kAppends:
      case op::kSetItem:
      case op::kSetItems: break;
      case op::kMemoize: ++puts; break;
      case op::kBinPut:
        ++puts;
        width = 1;
        break;
      case op::kLongBinPut:
        ++puts;
        width = 4;
        break;
      case op::kBinInt1: width = 1; break;
      case op::kBinInt2: width = 2; break;
      case op::kBinInt: width = 4; break;
      case op::kBinFloat:
      case op::kFrame: width = 8; break;
      case op::kLong1:
      case op::kShortBinUnicode:
        width = 1;
        data = le(pos, width);
        break;
      case op::kBinUnicode:
        width = 4;
        data = le(pos, width);
        break;
      case op::kBinUnicode8:
        width = 8;
        data = le(pos, width);
        break;
      case op::kLong4:
        width = 4;
        data = le(pos, width);
        if (data && *data >= (uint64_t{1} << 31)) return;  // a negative length fails
        break;
      case op::kBinGet:
      case op::kLongBinGet: {
        width = op == op::kBinGet ? 1 : 4;
        const std::optional<uint64_t> index = le(pos, width);
        // An index no PUT can have defined yet fails there: nothing after it is read.
        if (!index || *index >= puts) return;
        if (count_reads) {
          ++reads_[slot(*index)];
        } else {
          mark(*index);
        }
        break;
      }
      default: return;  // STOP, or an opcode refused or out of place: reading ends there
    }
    // clang-format on
    if (!data || width > size - pos || *data > size - pos - width) return;  // truncated
    pos += width + static_cast<size_t>(*data);
  }
}

}  // namespace

class PickleReader {
 public:
  PickleReader(std::string_view bytes, PickleItemSink* sink) : in_(bytes), sink_(sink) {}

  PyValue read() {
    if (in_.empty()) throw PickleError("pickle: empty input (a pickle starts with PROTO)", 0, -1);
    memo_reads_.emplace(in_);
    memo_.resize(memo_reads_->count());
    op_ = static_cast<uint8_t>(in_[0]);
    if (op_ != op::kProto) fail("a pickle of protocol 2 to 5 starts with PROTO");
    pos_ = 1;
    const uint64_t protocol = read_le(1);
    if (protocol < 2 || protocol > 5) {
      fail(fmt::format("protocol {}; only 2 to 5 are read", protocol));
    }
    while (step()) {
    }
    if (stack_.size() != 1 || !marks_.empty()) {
      fail(fmt::format("STOP with {} values on the stack and {} MARKs open (expected one value)",
                       stack_.size(), marks_.size()));
    }
    if (pos_ != in_.size()) {
      throw PickleError(
          fmt::format("pickle: {} bytes after STOP, at byte {}", in_.size() - pos_, pos_), pos_,
          -1);
    }
    seal(stack_[0]);
    return std::move(stack_[0]);
  }

  // Whether the lists whose items went to the sink are exactly root[key][i], each in no other
  // place: a value is placed once, and only a memo fetch can place it twice.
  bool streamed_as_predicted(const PyValue& root) const {
    if (streamed_.empty()) return true;
    if (fetched_streamed_ || root.kind() != PyValue::Kind::Dict) return false;
    const PyValue* outer = root.find(sink_->key());
    if (outer == nullptr || outer->kind() != PyValue::Kind::List) return false;
    const PyValue::Items& items = outer->items();
    for (const auto& [node, streamed] : streamed_) {
      if (streamed.outer != outer->identity() || streamed.index >= items.size() ||
          items[streamed.index].identity() != node) {
        return false;
      }
    }
    return true;
  }

 private:
  using SequencePtr = std::shared_ptr<PySequence>;
  using MappingPtr = std::shared_ptr<PyMapping>;

  [[noreturn]] void fail(std::string_view what) const {
    const std::string_view name = pickle_opcode_name(op_);
    const std::string opcode =
        name.empty() ? fmt::format("byte 0x{:02x}", op_) : fmt::format("{} (0x{:02x})", name, op_);
    throw PickleError(fmt::format("pickle: {} at byte {}: {}", opcode, op_start_, what), op_start_,
                      op_);
  }

  // ---- input ----

  // The next `nbytes` bytes, after checking that they are there.
  const uint8_t* take(uint64_t nbytes) {
    if (nbytes > in_.size() - pos_) {
      fail(fmt::format("needs {} more bytes, but the input ends after {} (truncated?)", nbytes,
                       in_.size() - pos_));
    }
    const auto* bytes = reinterpret_cast<const uint8_t*>(in_.data()) + pos_;
    pos_ += nbytes;
    return bytes;
  }

  uint64_t read_le(int nbytes) {
    const uint8_t* bytes = take(nbytes);
    uint64_t value = 0;
    for (int i = 0; i < nbytes; ++i) value |= uint64_t{bytes[i]} << (8 * i);
    return value;
  }

  // A LONG1/LONG4 payload: little-endian two's complement; an Int, or a BigInt outside int64.
  PyValue read_long(uint64_t nbytes) {
    const uint8_t* bytes = take(nbytes);
    return PyValue::int_from_bytes(
        std::string_view(reinterpret_cast<const char*>(bytes), static_cast<size_t>(nbytes)));
  }

  PyValue read_str(uint64_t nbytes) {
    const char* text = reinterpret_cast<const char*>(take(nbytes));
    const std::string_view view(text, nbytes);
    if (const size_t bad = find_invalid_utf8(view); bad != std::string_view::npos) {
      fail(fmt::format("the str is not UTF-8 (byte 0x{:02x} at byte {})",
                       static_cast<uint8_t>(view[bad]), pos_ - nbytes + bad));
    }
    return PyValue(PyValue::Storage(std::make_shared<const std::string>(view)));
  }

  // ---- stack ----

  // The first stack entry above the innermost MARK (what Python calls the current stack).
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }

  void need(size_t count) const {
    if (stack_.size() - floor() < count) {
      fail(fmt::format(
          "needs {} values on the stack above the last MARK, found {} (stack underflow)", count,
          stack_.size() - floor()));
    }
  }

  PyValue pop() {
    need(1);
    PyValue value = std::move(stack_.back());
    stack_.pop_back();
    return value;
  }

  // Closes the innermost MARK; returns the index of the first entry above it.
  size_t pop_mark() {
    if (marks_.empty()) fail("no MARK is open");
    const size_t begin = marks_.back();
    marks_.pop_back();
    return begin;
  }

  // ---- containers ----

  static PyValue open_list() {
    return PyValue(PyValue::Storage(std::make_shared<PySequence>(PySequence{{}, 1, false, true})));
  }
  static PyValue open_dict() {
    return PyValue(PyValue::Storage(std::make_shared<PyMapping>(PyMapping{{}, 1, true})));
  }

  // Marks `value` as placed inside another container: from now on it cannot change.
  static void seal(const PyValue& value) {
    if (const auto* list = std::get_if<SequencePtr>(&value.value_)) (*list)->open = false;
    if (const auto* dict = std::get_if<MappingPtr>(&value.value_); dict && (*dict)->open) {
      (*dict)->open = false;
      dedupe_keys((*dict)->entries);  // keys were checked when added: this cannot throw
    }
  }

  // The depth a container holding `child` reaches, checked against kPyMaxDepth.
  int depth_with(int depth, const PyValue& child) const {
    depth = std::max(depth, child.depth() + 1);
    if (depth > kPyMaxDepth) fail(fmt::format("containers nested deeper than {}", kPyMaxDepth));
    return depth;
  }

  // The stack entry `target`, which must be an open list (kind "list") or dict.
  template <typename NodePtr>
  auto& open_node(const PyValue& target, const char* kind) const {
    const auto* node = std::get_if<NodePtr>(&target.value_);
    if (node == nullptr || target.kind() == PyValue::Kind::Tuple) {
      fail(fmt::format("the value below the items is a {}, not a {}", target.kind_name(), kind));
    }
    if (!(*node)->open) {
      fail(fmt::format(
          "adds to a {} already placed inside another container (a recursive structure?)", kind));
    }
    return **node;
  }

  // Moves stack_[begin..] into the list `target` (APPEND, APPENDS, LIST).
  // Items of a list that streams go to the sink instead.
  void append_items(const PyValue& target, size_t begin) {
    PySequence& list = open_node<SequencePtr>(target, "list");
    const StreamedList* streamed = streamed_list(list);
    const size_t count = stack_.size() - begin;
    if (streamed == nullptr && list.items.capacity() < list.items.size() + count) {
      list.items.reserve(std::max(list.items.size() + count, 2 * list.items.size()));
    }
    for (size_t i = begin; i < stack_.size(); ++i) {
      if (stack_[i].identity() == &list) {
        fail("places a list inside itself (a recursive structure)");
      }
      list.depth = depth_with(list.depth, stack_[i]);
      seal(stack_[i]);
      if (streamed != nullptr) {
        sink_->take(streamed->index, std::move(stack_[i]));
      } else {
        list.items.push_back(std::move(stack_[i]));
      }
    }
    stack_.resize(begin);
  }

  // Moves the key-value pairs stack_[begin..] into the dict `target` (SETITEM, SETITEMS, DICT).
  void set_items(const PyValue& target, size_t begin) {
    PyMapping& dict = open_node<MappingPtr>(target, "dict");
    const size_t count = stack_.size() - begin;
    if (count % 2 != 0) {
      fail(fmt::format("{} values above the MARK: keys and values do not pair", count));
    }
    if (dict.entries.capacity() < dict.entries.size() + count / 2) {
      dict.entries.reserve(std::max(dict.entries.size() + count / 2, 2 * dict.entries.size()));
    }
    for (size_t i = begin; i < stack_.size(); i += 2) {
      const PyValue::Kind key_kind = stack_[i].kind();
      if (key_kind != PyValue::Kind::Str && key_kind != PyValue::Kind::Int) {
        fail(fmt::format("a dict key of type {} (only str and int keys are read)",
                         stack_[i].kind_name()));
      }
      if (stack_[i + 1].identity() == &dict) {
        fail("places a dict inside itself (a recursive structure)");
      }
      dict.depth = depth_with(dict.depth, stack_[i + 1]);
      seal(stack_[i + 1]);
      dict.entries.emplace_back(std::move(stack_[i]), std::move(stack_[i + 1]));
    }
    stack_.resize(begin);
  }

  // Replaces stack_[begin..] by one tuple of them (TUPLE, TUPLE1/2/3).
  void make_tuple(size_t begin) {
    PySequence tuple{{}, 1, /*tuple=*/true, /*open=*/false};
    tuple.items.reserve(stack_.size() - begin);
    for (size_t i = begin; i < stack_.size(); ++i) {
      tuple.depth = depth_with(tuple.depth, stack_[i]);
      seal(stack_[i]);
      tuple.items.push_back(std::move(stack_[i]));
    }
    stack_.resize(begin);
    stack_.push_back(PyValue(PyValue::Storage(std::make_shared<PySequence>(std::move(tuple)))));
  }

  // ---- memo ----

  // The memo is numbered 0 to memo_size_ - 1; only the entries some GET reads are kept.
  void memo_put(uint64_t index) {
    need(1);
    if (index > memo_size_) {
      fail(fmt::format("memo index {} skips ahead: the memo holds {} entries, numbered in order",
                       index, memo_size_));
    }
    if (index == memo_size_) ++memo_size_;
    if (!memo_reads_->read_back(index)) return;
    const size_t slot = memo_reads_->slot(index);
    if (memo_reads_->reads_left(slot) > 0) memo_[slot] = stack_.back();
  }

  void memo_get(uint64_t index) {
    if (index >= memo_size_) {
      fail(fmt::format("memo index {} is not defined (the memo holds {} entries)", index,
                       memo_size_));
    }
    // The first pass saw this GET (it stops only where this pass fails), so the entry was kept.
    internal_check(memo_reads_->read_back(index), "a memo entry read back was not kept");
    const size_t slot = memo_reads_->slot(index);
    if (sink_ != nullptr) note_fetched(memo_[slot]);
    if (memo_reads_->read(slot)) {
      stack_.push_back(std::move(memo_[slot]));  // its last GET: the memo lets it go
      memo_[slot] = PyValue();
    } else {
      stack_.push_back(memo_[slot]);
    }
  }

  // ---- streaming to a sink ----

  // Decides whether the list just created at stack_[p] streams, from where it is: root[key] is
  // created right after its key (SETITEM or SETITEMS places it later); its items, right above
  // it (APPEND) or above the MARK right above it (APPENDS). streamed_as_predicted() checks.
  void note_new_list(size_t p) {
    if (sink_ == nullptr || p == 0) return;
    const SequencePtr& list = std::get<SequencePtr>(stack_[p].value_);
    const PyValue& below = stack_[p - 1];
    if (below.kind() == PyValue::Kind::Str && below.as_str() == sink_->key()) {
      outers_.push_back(list);
      return;
    }
    if (outers_.empty()) return;
    const PySequence* outer = outers_.back().get();
    size_t first = 0;  // the stack position of the outer list's next item
    if (below.identity() == outer) {
      first = p;
    } else if (!marks_.empty() && marks_.back() >= 1 && marks_.back() <= p &&
               stack_[marks_.back() - 1].identity() == outer) {
      first = marks_.back();
    } else {
      return;
    }
    streamed_[list.get()] = {list, outer, outer->items.size() + (p - first)};
  }

  struct StreamedList {
    SequencePtr list;   // held, so that no other list takes its address
    const void* outer;  // the list it was created to be an item of
    size_t index;       // its place there
  };

  const StreamedList* streamed_list(const PySequence& list) const {
    if (streamed_.empty()) return nullptr;
    const auto it = streamed_.find(&list);
    return it == streamed_.end() ? nullptr : &it->second;
  }

  // A streamed or outer list fetched from the memo is in two places: not what was predicted.
  void note_fetched(const PyValue& value) {
    if (value.kind() != PyValue::Kind::List) return;
    const void* node = value.identity();
    fetched_streamed_ = fetched_streamed_ || streamed_.contains(node) ||
                        std::any_of(outers_.begin(), outers_.end(),
                                    [node](const SequencePtr& o) { return o.get() == node; });
  }

  // ---- opcodes ----

  // ---- the budget ----

  // What the values read so far took, at most (each value's slot in its container, and the heap
  // block of each str and container; memo fetches share theirs), checked against a budget
  // proportional to the input: a snapshot takes about 7 to 14 times its pickle, a pickle of
  // nothing but EMPTY_LIST opcodes about 90 times. Past the budget reading stops at once,
  // rather than after the machine's memory.
  void charge(size_t heap_bytes) {
    built_ += sizeof(PyValue) + heap_bytes;
    if (built_ > budget_) {
      fail(
          fmt::format("the values read so far take more than {} bytes, {} times the pickle's {} "
                      "bytes plus {} MiB (a snapshot takes about 7 times): refused",
                      budget_, kPickleBudgetFactor, in_.size(), kPickleBudgetFloor >> 20));
    }
  }
  static constexpr size_t kHeapBlock = 64;  // a shared str or container: its control block,
                                            // object and allocator header

  // Runs one opcode; false after STOP.
  bool step() {
    if (pos_ == in_.size()) {
      throw PickleError(
          fmt::format("pickle: the input ends at byte {} before STOP (truncated?)", pos_), pos_,
          -1);
    }
    op_start_ = pos_;
    op_ = *take(1);
    switch (op_) {
      case op::kStop: return false;
      case op::kFrame:
        // A frame only groups opcodes for buffered reading; its length must still be there.
        if (const uint64_t length = read_le(8); length > in_.size() - pos_) {
          fail(fmt::format("a frame of {} bytes, but only {} remain", length, in_.size() - pos_));
        }
        break;
      case op::kMark:
        if (marks_.size() >= static_cast<size_t>(kPyMaxDepth)) {
          fail(fmt::format("more than {} MARKs open", kPyMaxDepth));
        }
        marks_.push_back(stack_.size());
        break;
      case op::kNone: stack_.emplace_back(); break;
      case op::kNewTrue: stack_.emplace_back(true); break;
      case op::kNewFalse: stack_.emplace_back(false); break;
      case op::kBinInt1: stack_.emplace_back(static_cast<int64_t>(read_le(1))); break;
      case op::kBinInt2: stack_.emplace_back(static_cast<int64_t>(read_le(2))); break;
      case op::kBinInt:
        stack_.emplace_back(int64_t{static_cast<int32_t>(static_cast<uint32_t>(read_le(4)))});
        break;
      case op::kLong1: stack_.push_back(read_long(read_le(1))); break;
      case op::kLong4: {
        const auto length = static_cast<int32_t>(static_cast<uint32_t>(read_le(4)));
        if (length < 0) fail(fmt::format("a negative length {}", length));
        stack_.push_back(read_long(static_cast<uint64_t>(length)));
        break;
      }
      case op::kBinFloat: {
        const uint8_t* bytes = take(8);
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | bytes[i];  // big-endian
        stack_.emplace_back(std::bit_cast<double>(bits));
        break;
      }
      case op::kShortBinUnicode: stack_.push_back(read_str(read_le(1))); break;
      case op::kBinUnicode: stack_.push_back(read_str(read_le(4))); break;
      case op::kBinUnicode8: stack_.push_back(read_str(read_le(8))); break;
      case op::kEmptyList:
        stack_.push_back(open_list());
        note_new_list(stack_.size() - 1);
        break;
      case op::kEmptyDict: stack_.push_back(open_dict()); break;
      case op::kEmptyTuple: stack_.push_back(PyValue::tuple()); break;
      case op::kList: {
        const size_t begin = pop_mark();
        stack_.insert(stack_.begin() + static_cast<std::ptrdiff_t>(begin), open_list());
        note_new_list(begin);
        append_items(stack_[begin], begin + 1);
        break;
      }
      case op::kDict: {
        const size_t begin = pop_mark();
        stack_.insert(stack_.begin() + static_cast<std::ptrdiff_t>(begin), open_dict());
        set_items(stack_[begin], begin + 1);
        break;
      }
      case op::kTuple: make_tuple(pop_mark()); break;
      case op::kTuple1:
        need(1);
        make_tuple(stack_.size() - 1);
        break;
      case op::kTuple2:
        need(2);
        make_tuple(stack_.size() - 2);
        break;
      case op::kTuple3:
        need(3);
        make_tuple(stack_.size() - 3);
        break;
      case op::kAppend:
        need(2);
        append_items(stack_[stack_.size() - 2], stack_.size() - 1);
        break;
      case op::kAppends: {
        const size_t begin = pop_mark();
        if (begin <= floor()) fail("no list below the MARK (stack underflow)");
        append_items(stack_[begin - 1], begin);
        break;
      }
      case op::kSetItem:
        need(3);
        set_items(stack_[stack_.size() - 3], stack_.size() - 2);
        break;
      case op::kSetItems: {
        const size_t begin = pop_mark();
        if (begin <= floor()) fail("no dict below the MARK (stack underflow)");
        set_items(stack_[begin - 1], begin);
        break;
      }
      case op::kMemoize: memo_put(memo_size_); break;
      case op::kBinPut: memo_put(read_le(1)); break;
      case op::kLongBinPut: memo_put(read_le(4)); break;
      case op::kBinGet: memo_get(read_le(1)); break;
      case op::kLongBinGet: memo_get(read_le(4)); break;
      case op::kProto: fail("PROTO is read only at the start");
      default: fail(fmt::format("refused: {}", refusal_reason(op_)));
    }
    charge_for(op_);
    return true;
  }

  void charge_for(uint8_t op) {
    switch (op) {
      case op::kNone:
      case op::kNewTrue:
      case op::kNewFalse:
      case op::kBinInt1:
      case op::kBinInt2:
      case op::kBinInt:
      case op::kBinFloat:
      case op::kBinGet:
      case op::kLongBinGet: charge(0); break;
      case op::kShortBinUnicode:
      case op::kBinUnicode:
      case op::kBinUnicode8: charge(kHeapBlock + stack_.back().as_str().size()); break;
      case op::kLong1:
      case op::kLong4:
        charge(stack_.back().kind() == PyValue::Kind::BigInt
                   ? kHeapBlock + stack_.back().big_int_bytes().size()
                   : 0);
        break;
      case op::kEmptyList:
      case op::kEmptyDict:
      case op::kEmptyTuple:
      case op::kList:
      case op::kDict:
      case op::kTuple:
      case op::kTuple1:
      case op::kTuple2:
      case op::kTuple3: charge(kHeapBlock); break;
      default: break;  // MARK, FRAME, the memo's PUTs, and what fills containers: nothing new
    }
  }

  std::string_view in_;
  size_t pos_ = 0;       // the next byte to read
  size_t op_start_ = 0;  // where the current opcode starts
  uint8_t op_ = 0;       // the current opcode
  std::vector<PyValue> stack_;
  std::vector<size_t> marks_;  // stack sizes at each open MARK
  PickleItemSink* sink_ = nullptr;
  std::vector<SequencePtr> outers_;  // lists created right after the sink's key, in order
  std::unordered_map<const void*, StreamedList> streamed_;  // lists whose items the sink takes
  bool fetched_streamed_ = false;        // a memo fetch pushed one of those or an outer list
  std::optional<MemoReads> memo_reads_;  // the indices some GET reads
  std::vector<PyValue> memo_;            // the entries kept: one slot per index read back
  uint64_t memo_size_ = 0;               // the entries defined, kept or not
  size_t built_ = 0;                     // charge(): what the values read so far took
  size_t budget_ = kPickleBudgetFloor + kPickleBudgetFactor * in_.size();
};

}  // namespace memgrad::detail

namespace memgrad {

PyValue read_pickle(std::string_view bytes) { return detail::PickleReader(bytes, nullptr).read(); }

std::optional<PyValue> read_pickle(std::string_view bytes, PickleItemSink& sink) {
  detail::PickleReader reader(bytes, &sink);
  PyValue value = reader.read();
  if (!reader.streamed_as_predicted(value)) return std::nullopt;
  return value;
}

}  // namespace memgrad
