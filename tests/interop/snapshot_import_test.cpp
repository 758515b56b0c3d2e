// Importing a pickled snapshot with its trace streamed (import_snapshot_pickle,
// import_snapshot_file): the same requests, contexts, notes and errors as importing the whole
// tree, and a peak of memory bounded by the pickle's size.
#include <doctest/doctest.h>

#include <fstream>
#include <random>
#include <string>
#include <typeinfo>
#include <vector>

#include <fmt/format.h>

#include "allocator/bounded_memory.h"
#include "allocator/error.h"
#include "interop/memory_snapshot.h"
#include "interop/pickle_reader.h"
#include "interop/pickle_writer.h"
#include "interop/snapshot_import.h"
#include "lab/policy_registry.h"
#include "tests/support/allocator_invariants.h"
#include "tests/support/heap_peak.h"
#include "tests/support/temp_dir.h"

using namespace memgrad;
using memgrad::testing::known_policy_names;

namespace {

// A training-like stream (steps of 40 requests of mixed sizes, some freed out of order, an
// empty_cache() now and then) recorded by `policy` until the trace holds `events` events.
PyValue recorded_snapshot(const std::string& policy, size_t events) {
  BoundedMemory memory(8 * kGiB, "sim:0");
  AllocatorConfig config;
  config.policy = policy;
  std::unique_ptr<PolicyAllocator> a = make_allocator(config, memory);
  a->trace().enable();
  std::mt19937_64 rng(3);
  const size_t sizes[] = {512, 4096, 65536, 1 << 20, 3 << 20, 12 << 20, 40000, 700000};
  std::vector<Block> live;
  for (size_t step = 0; a->trace().size() < events; ++step) {
    for (size_t i = 0; i < 40; ++i) {
      live.push_back(a->allocate(sizes[i % 8] * (step % 7 == 6 ? 3 : 1) / 2 + 1));
      if (live.size() > 12 && rng() % 3 == 0) {
        const size_t k = rng() % live.size();
        a->free(live[k]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
    for (size_t k = step % 2; k < live.size(); ++k) a->free(live[k]);  // some stay a step more
    live.resize(step % 2 == 0 ? 0 : std::min<size_t>(live.size(), 1));
    if (step % 9 == 8) {
      a->mark_in_trace(TraceAction::EmptyCache);
      a->empty_cache();
    }
  }
  return memory_snapshot(*a, config, 1);  // device 1: device_traces[0] is empty
}

// Everything an import gives, one line per field, event and context.
std::string describe(const ImportedSnapshot& s) {
  std::string out = fmt::format(
      "device {} {} capacity {} oom {} {} peak {} before {} {} failed {} snapshots {} config {}\n",
      s.device, s.device_name, s.capacity, s.recorded_oom, s.segments_before_oom,
      s.recorded_peak_reserved, s.live_before_history, s.frees_before_history, s.failed_requests,
      s.snapshot_markers, s.config.to_string());
  for (const std::string& note : s.notes) out += "note: " + note + "\n";
  for (const TraceContextRecord& c : s.contexts) {
    out += fmt::format("context {}|{}|{}\n", c.phase, c.op, c.label);
  }
  for (const auto* events : {&s.events, &s.recorded_segments}) {
    for (const TraceEvent& e : *events) {
      out += fmt::format("{} {} {} {} {} {} {} {} {}\n", trace_action_name(e.action), e.stream,
                         e.time_ns, e.address, e.nbytes, e.requested, e.allocated, e.reserved,
                         e.context);
    }
    out += "--\n";
  }
  return out;
}

// The import's description, or the type and message of what it threw.
template <typename Import>
std::string outcome(Import import) {
  try {
    return describe(import());
  } catch (const Error& e) {
    return fmt::format("{}: {}", typeid(e).name(), e.what());
  }
}

}  // namespace

TEST_SUITE("interop") {

TEST_CASE("a pickled snapshot imports streamed exactly as its whole tree does, for every policy") {
  for (const std::string& policy : known_policy_names()) {
    const PyValue snapshot = recorded_snapshot(policy, 3000);
    for (int protocol : {2, 4}) {
      CAPTURE(policy);
      CAPTURE(protocol);
      const std::string pickle = write_pickle(snapshot, protocol);
      const std::string whole = outcome([&] { return import_snapshot(read_pickle(pickle)); });
      CHECK(whole.find("device 1") == 0);
      CHECK_EQ(outcome([&] { return import_snapshot_pickle(pickle); }), whole);
      CHECK_EQ(outcome([&] { return import_snapshot_pickle(pickle, 0); }),
               outcome([&] { return import_snapshot(read_pickle(pickle), 0); }));
    }
  }
}

TEST_CASE("a snapshot whose trace list is also elsewhere is read again whole, to the same result") {
  const PyValue snapshot = recorded_snapshot("caching", 500);
  PyValue::Entries entries = snapshot.entries();
  entries.emplace_back("trace_again", snapshot.at("device_traces").item(1));
  const std::string pickle = write_pickle(PyValue::dict(std::move(entries)), 2);
  CHECK_EQ(outcome([&] { return import_snapshot_pickle(pickle); }),
           outcome([&] { return import_snapshot(read_pickle(pickle)); }));
}

TEST_CASE("mutated snapshot pickles import streamed to the same result or the same error") {
  const std::string good = write_pickle(recorded_snapshot("caching", 300), 2);
  std::mt19937_64 rng(5);
  size_t imported = 0, refused = 0;
  for (int i = 0; i < 1200; ++i) {
    std::string bytes = good;
    for (int k = 0; k < 2; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    if (i % 10 == 0) bytes.resize(rng() % bytes.size());
    const std::string whole = outcome([&] { return import_snapshot(read_pickle(bytes)); });
    CHECK_EQ(outcome([&] { return import_snapshot_pickle(bytes); }), whole);
    (whole.find("device ") == 0 ? imported : refused) += 1;
  }
  CHECK(imported > 20);  // many mutations hit a value, not the structure
  CHECK(refused > 100);
}

TEST_CASE("import_snapshot_file reads pickle and JSON as read_snapshot_file and import_snapshot") {
  const PyValue snapshot = recorded_snapshot("caching", 500);
  memgrad::testing::TempDir dir;
  for (const std::string name : {"s.pickle", "s.json"}) {
    CAPTURE(name);
    const std::string path = (dir.path() / name).string();
    write_snapshot_file(path, snapshot);
    CHECK_EQ(outcome([&] { return import_snapshot_file(path); }),
             outcome([&] { return import_snapshot(read_snapshot_file(path)); }));
  }
  CHECK_THROWS_AS(import_snapshot_file((dir.path() / "missing").string()), IoError);
}

TEST_CASE("importing a pickled snapshot of 10^5 events holds at most twice the pickle's size") {
  std::string pickle = write_pickle(recorded_snapshot("caching", 100'000), 2);
  const auto nbytes = static_cast<int64_t>(pickle.size());
  int64_t whole_peak = 0;
  {
    memgrad::testing::HeapPeak peak;
    const ImportedSnapshot s = import_snapshot(read_pickle(pickle));
    whole_peak = peak.bytes();
  }
  memgrad::testing::HeapPeak peak;
  const ImportedSnapshot s = import_snapshot_pickle(std::move(pickle));
  CHECK(s.events.size() > 60'000);
  // The pickle was live before: it counts at the peak, released inside. Reading holds it and
  // a 32-byte record per event (33 with the deque's blocks; the pickle takes about 46 bytes per
  // event); building the requests holds the records and 72 bytes per request (two thirds of the
  // events): 1.82 times the pickle when written. The whole tree took 13.2 times.
  CAPTURE(nbytes);
  CAPTURE(peak.bytes());
  CAPTURE(whole_peak);
  CHECK(nbytes + peak.bytes() <= 2 * nbytes);
  CHECK(nbytes + whole_peak >= 8 * nbytes);  // the gain is real
}

}  // TEST_SUITE("interop")
