// The pickle reader on hostile input, in bounded time: every truncation and thousands of seeded
// mutations of real pickles each read or throw PickleError, never crash, hang or throw anything
// else (the sanitizer build runs this too), and a pickle whose memo would expand into a tree of
// 2^999 nodes is read and written back in linear size.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "interop/error.h"
#include "interop/pickle_reader.h"
#include "interop/pickle_writer.h"
#include "interop/py_value.h"
#include "tests/interop/pickle_samples.h"

using namespace memgrad;
using namespace memgrad::pickle_samples;

namespace {

// Valid pickles to corrupt: CPython's (protocols 2 and 4), and one of ours with more than 256
// memo entries (LONG_BINPUT, LONG_BINGET) and several batches.
std::vector<std::string> seeds() {
  std::vector<std::string> pickles;
  for (const auto& [protocol, hex] : rich_pickles()) {
    if (protocol == 2 || protocol == 4) pickles.push_back(from_hex(hex));
  }
  PyValue::Items items;
  const PyValue shared = PyValue::dict({{"line", 1}});
  for (int i = 0; i < 1200; ++i) {
    items.push_back(i % 4 == 0   ? PyValue(std::to_string(i % 300) + "s")
                    : i % 4 == 1 ? shared
                                 : PyValue(i * 997));
  }
  pickles.push_back(write_pickle(PyValue::list(std::move(items)), 2));
  return pickles;
}

// One random change: a byte replaced (by any byte or by an opcode), a span deleted or repeated,
// or an opcode inserted.
std::string mutate(const std::string& bytes, std::mt19937_64& rng) {
  static const std::string kOpcodes =
      "(.NJKMXae}h j]qrstu)G\x80\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x94\x95ld";
  std::string out = bytes;
  const size_t pos = rng() % out.size();
  switch (rng() % 5) {
    case 0: out[pos] = static_cast<char>(rng() % 256); break;
    case 1: out[pos] = kOpcodes[rng() % kOpcodes.size()]; break;
    case 2: out.erase(pos, 1 + rng() % 8); break;
    case 3: out.insert(pos, out.substr(pos, 1 + rng() % 24)); break;
    default:
      out.insert(out.begin() + static_cast<std::ptrdiff_t>(pos), kOpcodes[rng() % kOpcodes.size()]);
  }
  return out;
}

// Appends the memo fetch of `index` (BINGET or LONG_BINGET).
void append_get(std::string& bytes, uint32_t index) {
  if (index < 256) {
    bytes += 'h';
    bytes += static_cast<char>(index);
    return;
  }
  bytes += 'j';
  for (int i = 0; i < 4; ++i) bytes += static_cast<char>(index >> (8 * i));
}

}  // namespace

TEST_SUITE("interop") {

TEST_CASE("every truncation of a valid pickle is a PickleError") {
  for (const std::string& pickle : seeds()) {
    REQUIRE_NOTHROW((void)read_pickle(pickle));
    for (size_t length = 0; length < pickle.size(); ++length) {
      CAPTURE(length);
      CHECK_THROWS_AS((void)read_pickle(std::string_view(pickle).substr(0, length)), PickleError);
    }
  }
}

TEST_CASE(
    "seeded mutations of valid pickles either read or throw PickleError, never anything else") {
  std::mt19937_64 rng(20240611);
  int read = 0;
  int refused = 0;
  for (const std::string& pickle : seeds()) {
    for (int i = 0; i < 2000; ++i) {
      std::string bytes = mutate(pickle, rng);
      if (i % 3 == 0) bytes = mutate(bytes, rng);  // some with two changes
      CAPTURE(to_hex(bytes));
      try {
        const PyValue value = read_pickle(bytes);
        // Whatever was read is a valid value: it writes and reads back unchanged.
        CHECK(read_pickle(write_pickle(value, 4)) == value);
        ++read;
      } catch (const PickleError&) {
        ++refused;
      }
    }
  }
  // Both outcomes occur, so the mutations neither all break the pickle nor all miss it.
  CHECK(read > 100);
  CHECK(refused > 100);
}

TEST_CASE("a memo that would expand into 2^999 nodes is read and written in linear size") {
  // x0 = (); x(i) = (x(i-1), x(i-1)). With x(i-1) on the stack, each level fetches it once more
  // from the memo, pairs the two (TUPLE2) and memoizes the pair.
  std::string pickle = std::string("\x80\x04)\x94", 4);
  for (int i = 1; i < kPyMaxDepth; ++i) {
    append_get(pickle, static_cast<uint32_t>(i - 1));
    pickle += "\x86\x94";
  }
  pickle += '.';
  const PyValue value = read_pickle(pickle);
  CHECK_EQ(value.depth(), kPyMaxDepth);
  CHECK(value.items()[0].identity() == value.items()[1].identity());
  const std::string written = write_pickle(value, 4);
  CHECK(written.size() < 4 * pickle.size());
  CHECK_EQ(read_pickle(written).depth(), kPyMaxDepth);
}

}  // TEST_SUITE("interop")
