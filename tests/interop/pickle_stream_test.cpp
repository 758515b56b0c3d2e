// read_pickle with a PickleItemSink: the items of root[key][i] handed over as they are read and
// everything else read as without a sink, with the same errors, or nullopt when those lists turn
// out to be elsewhere; and the memo, which keeps an entry only while a GET of it is to come.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "interop/error.h"
#include "interop/pickle_reader.h"
#include "interop/pickle_writer.h"
#include "interop/py_value.h"
#include "tests/interop/pickle_samples.h"
#include "tests/support/heap_peak.h"

using namespace memgrad;
using namespace memgrad::pickle_samples;

namespace {

// Keeps what it is given, list by list.
class Collect : public PickleItemSink {
 public:
  std::string_view key() const override { return "device_traces"; }
  void take(size_t list, PyValue item) override {
    if (lists.size() <= list) lists.resize(list + 1);
    lists[list].push_back(std::move(item));
  }
  std::vector<PyValue::Items> lists;
};

// Drops what it is given.
class Drop : public PickleItemSink {
 public:
  std::string_view key() const override { return "device_traces"; }
  void take(size_t, PyValue) override { ++taken; }
  size_t taken = 0;
};

// `root` with the items `sink` took put back in root["device_traces"][i]: what read_pickle
// gives for the same bytes.
PyValue refill(const PyValue& root, const Collect& sink) {
  PyValue::Entries entries;
  for (const auto& [key, value] : root.entries()) {
    if (key.kind() != PyValue::Kind::Str || key.as_str() != "device_traces" ||
        value.kind() != PyValue::Kind::List) {
      entries.emplace_back(key, value);
      continue;
    }
    PyValue::Items lists = value.items();
    for (size_t i = 0; i < lists.size() && i < sink.lists.size(); ++i) {
      if (!sink.lists[i].empty()) lists[i] = PyValue::list(sink.lists[i]);
    }
    entries.emplace_back(key, PyValue::list(std::move(lists)));
  }
  return PyValue::dict(std::move(entries));
}

// A snapshot's shape: device_traces holding lists of entry dicts (sharing keys and a frames
// list, as memgrad's snapshots do), one of them empty.
PyValue traces_value(int entries) {
  const PyValue frames = PyValue::list({PyValue::dict({{"filename", "a.py"}, {"name", "f"}})});
  PyValue::Items first, third;
  for (int i = 0; i < entries; ++i) {
    PyValue entry = PyValue::dict({{"action", i % 2 == 0 ? "alloc" : "free_completed"},
                                   {"addr", i / 2 * 512},
                                   {"size", 512},
                                   {"frames", frames}});
    (i % 3 == 2 ? third : first).push_back(std::move(entry));
  }
  return PyValue::dict(
      {{"segments", PyValue::list()},
       {"device_traces", PyValue::list({PyValue::list(std::move(first)), PyValue::list(),
                                        PyValue::list(std::move(third))})},
       {"n", 3}});
}

}  // namespace

TEST_SUITE("interop") {

TEST_CASE("a sink takes the items of root[key][i] in order; the rest reads as without a sink") {
  // pickle.dumps({'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 0, 'size': 1}],
  // [], [{'action': 'alloc', 'addr': 512, 'size': 2}, {'action': 'free_completed', 'addr': 512,
  // 'size': 2}]], 'n': 3}, protocol=2, then 4) by CPython 3.11, and the same shape written here.
  std::vector<std::string> pickles = {
      from_hex("80027d71002858080000007365676d656e747371015d7102580d0000006465766963655f74726163"
               "657371035d7104285d71057d7106285806000000616374696f6e71075805000000616c6c6f637108"
               "58040000006164647271094b00580400000073697a65710a4b0175615d710b5d710c287d710d2868"
               "07680868094d0002680a4b02757d710e286807580e000000667265655f636f6d706c65746564710f"
               "68094d0002680a4b0275656558010000006e71104b03752e"),
      from_hex("8004958d000000000000007d94288c087365676d656e7473945d948c0d6465766963655f74726163"
               "6573945d94285d947d94288c06616374696f6e948c05616c6c6f63948c0461646472944b008c0473"
               "697a65944b0175615d945d94287d94286807680868094d0002680a4b02757d942868078c0e667265"
               "655f636f6d706c657465649468094d0002680a4b027565658c016e944b03752e"),
      write_pickle(traces_value(2500), 2),
      write_pickle(traces_value(2500), 4),
  };
  for (const std::string& pickle : pickles) {
    CAPTURE(pickle.size());
    Collect sink;
    const std::optional<PyValue> streamed = read_pickle(pickle, sink);
    REQUIRE(streamed.has_value());
    const PyValue whole = read_pickle(pickle);
    // Every item went to the sink, and its lists came back empty.
    for (size_t i = 0; i < whole.at("device_traces").items().size(); ++i) {
      CAPTURE(i);
      CHECK(streamed->at("device_traces").item(i).items().empty());
      CHECK_EQ(i < sink.lists.size() ? sink.lists[i].size() : 0,
               whole.at("device_traces").item(i).items().size());
    }
    CHECK(refill(*streamed, sink) == whole);
    CHECK_EQ(streamed->depth(), whole.depth());  // depths count the items taken
  }
}

TEST_CASE("lists built after their items (LIST, DICT opcodes) are read whole, none streamed") {
  // MARK 'device_traces' MARK MARK MARK 'action' 'alloc' DICT LIST LIST DICT: every item exists
  // before its list, so no list is created where a trace list would be.
  const std::string pickle = from_hex(
      "8002288c0d6465766963655f747261636573282828"
      "8c06616374696f6e8c05616c6c6f63646c6c642e");
  Collect sink;
  const std::optional<PyValue> streamed = read_pickle(pickle, sink);
  REQUIRE(streamed.has_value());
  CHECK(sink.lists.empty());
  CHECK(*streamed == read_pickle(pickle));
}

TEST_CASE("lists taken to stream but found elsewhere or in two places give nullopt") {
  const PyValue list = PyValue::list({PyValue::dict({{"action", "alloc"}})});
  const std::vector<PyValue> values = {
      // A trace list also placed under another key, through the memo.
      PyValue::dict({{"device_traces", PyValue::list({list})}, {"again", list}}),
      // The outer list placed twice.
      [] {
        const PyValue outer = PyValue::list({PyValue::list({1, 2})});
        return PyValue::dict({{"device_traces", outer}, {"again", outer}});
      }(),
      // The key in a nested dict: the lists are not the outermost dict's.
      PyValue::dict({{"x", PyValue::dict({{"device_traces", PyValue::list({list})}})}}),
  };
  for (const PyValue& value : values) {
    for (int protocol : {2, 4}) {
      CAPTURE(protocol);
      Collect sink;
      CHECK_FALSE(read_pickle(write_pickle(value, protocol), sink).has_value());
      CHECK(read_pickle(write_pickle(value, protocol)) == value);
    }
  }
}

TEST_CASE("mutations of a pickle read with a sink throw the same error or read the same value") {
  const std::vector<std::string> seeds = {write_pickle(traces_value(40), 2),
                                          write_pickle(traces_value(40), 4)};
  std::mt19937_64 rng(7);
  int same_value = 0, same_error = 0;
  for (const std::string& seed : seeds) {
    for (int i = 0; i < 1500; ++i) {
      std::string bytes = seed;
      for (int k = 0; k <= i % 3; ++k) {
        const size_t pos = rng() % bytes.size();
        if (rng() % 4 == 0) {
          bytes.erase(pos, 1 + rng() % 4);
        } else {
          bytes[pos] = static_cast<char>(rng());
        }
      }
      CAPTURE(to_hex(bytes));
      std::string whole_error, streamed_error;
      std::optional<PyValue> whole, streamed;
      Collect sink;
      try {
        whole = read_pickle(bytes);
      } catch (const PickleError& e) {
        whole_error = e.what();
      }
      try {
        streamed = read_pickle(bytes, sink);
        if (!streamed) continue;  // the caller reads again whole: nothing to compare
      } catch (const PickleError& e) {
        streamed_error = e.what();
      }
      CHECK_EQ(streamed_error, whole_error);
      CHECK_EQ(streamed.has_value(), whole.has_value());
      if (streamed && whole) {
        CHECK(refill(*streamed, sink) == *whole);
        ++same_value;
      } else {
        ++same_error;
      }
    }
  }
  CHECK(same_value > 100);
  CHECK(same_error > 100);
}

TEST_CASE("the memo keeps no object past its last GET, and none that no GET reads") {
  // 10^5 entries, each memoized (write_pickle, like CPython, memoizes every dict and list) and
  // each pair sharing one frames list, so each list is read back once, right after it is made.
  PyValue::Items trace;
  for (int i = 0; i < 100'000; i += 2) {
    const PyValue frames = PyValue::list({PyValue::dict({{"line", i}})});
    for (int k = 0; k < 2; ++k) {
      trace.push_back(PyValue::dict({{"addr", i + k}, {"frames", frames}}));
    }
  }
  const std::string pickle = write_pickle(
      PyValue::dict({{"device_traces", PyValue::list({PyValue::list(std::move(trace))})}}), 2);
  Drop sink;
  memgrad::testing::HeapPeak peak;
  const std::optional<PyValue> streamed = read_pickle(pickle, sink);
  REQUIRE(streamed.has_value());
  CHECK_EQ(sink.taken, 100'000);
  // What stays alive while reading: the stack (a batch of 1000 entries before APPENDS), a bit
  // per memo index, and the memo's table of 32 bytes per index some GET reads (the keys, and
  // here every frames list): about 20 bytes per entry, which the pickle holds in 28. A memo that
  // kept the entries, or the frames lists after their last GET, would add 120 to 200 bytes per
  // entry: 4 to 7 times the pickle.
  CAPTURE(pickle.size());
  CAPTURE(peak.bytes());
  CHECK(peak.bytes() < static_cast<int64_t>(pickle.size()));
}

}  // TEST_SUITE("interop")
