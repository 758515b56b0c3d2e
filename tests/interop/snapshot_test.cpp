// Memory snapshots in PyTorch's format: written from every policy, read back as a request
// stream, replayed, and compared with the segment decisions they recorded; malformed snapshots
// are typed errors naming the place, never a crash.
//
// The run below (allocs of many sizes, frees, an empty_cache()) is done on a simulated device,
// so the replay's device has the same addresses and even address-ordered policies must decide
// exactly as they did.
#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

#include "allocator/bounded_memory.h"
#include "allocator/error.h"
#include "interop/error.h"
#include "interop/memory_snapshot.h"
#include "interop/pickle_reader.h"
#include "interop/pickle_writer.h"
#include "interop/snapshot_import.h"
#include "interop/trace_reader.h"
#include "interop/trace_writer.h"
#include "lab/policy_registry.h"
#include "lab/trace_replay.h"
#include "tests/support/allocator_invariants.h"

using namespace memgrad;
using memgrad::testing::known_policy_names;

namespace {

constexpr size_t kCapacity = 256 * kMiB;

// A fixed mix of small and large requests, frees in another order, and one empty_cache().
void run_workload(PolicyAllocator& a) {
  std::mt19937_64 rng(11);
  std::vector<Block> live;
  for (int i = 0; i < 300; ++i) {
    const bool large = rng() % 5 == 0;
    const size_t n = large ? 1 * kMiB + rng() % (12 * kMiB) : 1 + rng() % (64 * 1024);
    live.push_back(a.allocate(n));
    if (live.size() > 20 && rng() % 2 == 0) {
      const size_t victim = rng() % live.size();
      a.free(live[victim]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    }
    if (i == 150) {
      for (size_t k = 0; k < live.size() / 2; ++k) a.free(live[k]);
      live.erase(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(live.size() / 2));
      a.mark_in_trace(TraceAction::EmptyCache);
      a.empty_cache();
    }
  }
  for (size_t k = 0; k < live.size(); k += 3) a.free(live[k]);  // some stay live at the end
}

struct Recorded {
  PyValue snapshot;
  std::string pickle;
};

Recorded record(const std::string& policy) {
  BoundedMemory memory(kCapacity, "sim:0");
  AllocatorConfig config;
  config.policy = policy;
  std::unique_ptr<PolicyAllocator> a = make_allocator(config, memory);
  a->trace().enable();
  run_workload(*a);
  Recorded r;
  r.snapshot = memory_snapshot(*a, config, 0);
  r.pickle = write_pickle(r.snapshot, 2);
  return r;
}

// The TraceError import_snapshot(s) throws, or "(no error)".
std::string import_error(const PyValue& s) {
  try {
    import_snapshot(s);
  } catch (const TraceError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_SUITE("interop") {

TEST_CASE("a snapshot has PyTorch's keys and its blocks tile each segment") {
  const PyValue s = record("caching").snapshot;
  for (const char* key : {"segments", "device_traces", "allocator_settings"}) {
    CAPTURE(key);
    CHECK(s.find(key) != nullptr);
  }
  const PyValue& settings = s.at("allocator_settings");
  CHECK_EQ(settings.at("max_split_size").as_int(), -1);  // no limit, as PyTorch writes it
  CHECK_FALSE(settings.at("expandable_segments").as_bool());
  int64_t reserved = 0;
  for (const PyValue& seg : s.at("segments").items()) {
    int64_t address = seg.at("address").as_int(), allocated = 0, requested = 0;
    for (const PyValue& b : seg.at("blocks").items()) {
      CHECK_EQ(b.at("address").as_int(), address);  // contiguous, in address order
      address += b.at("size").as_int();
      if (b.at("state").as_str() == "active_allocated") {
        allocated += b.at("size").as_int();
        requested += b.at("requested_size").as_int();
        CHECK(b.find("frames") != nullptr);
      }
    }
    CHECK_EQ(address - seg.at("address").as_int(), seg.at("total_size").as_int());
    CHECK_EQ(seg.at("allocated_size").as_int(), allocated);
    CHECK_EQ(seg.at("requested_size").as_int(), requested);
    reserved += seg.at("total_size").as_int();
  }
  // The last event's totals are the allocator's.
  CHECK(reserved > 0);
  const PyValue::Items& trace = s.at("device_traces").item(0).items();
  REQUIRE_FALSE(trace.empty());
  for (const PyValue& e : trace) {
    const std::string& action = e.at("action").as_str();
    CHECK(action != "empty_cache");  // memgrad's marker has no PyTorch entry
    CHECK_EQ(e.find("frames") != nullptr, action != "snapshot");  // PyTorch's has none
  }
  CHECK_EQ(trace.back().at("action").as_str(), "snapshot");
}

TEST_CASE("taking a snapshot while recording adds PyTorch's snapshot entry: addr 0, active bytes") {
  BoundedMemory memory(kCapacity, "sim:0");
  std::unique_ptr<PolicyAllocator> a = make_allocator(AllocatorConfig{}, memory);
  const Block before = a->allocate(3000);  // not recording yet: no entry for the first snapshot
  const PyValue quiet = memory_snapshot(*a, AllocatorConfig{}, 0);
  CHECK(quiet.at("device_traces").item(0).items().empty());
  CHECK_EQ(a->trace().size(), 0);
  a->trace().enable();
  const Block small = a->allocate(1000);      // 1024 B block
  const Block large = a->allocate(5 * kMiB);  // 5 MiB block
  const size_t active = 3072 + 1024 + 5 * kMiB;
  const PyValue first = memory_snapshot(*a, AllocatorConfig{}, 0);
  a->free(large);
  const PyValue second = memory_snapshot(*a, AllocatorConfig{}, 0);
  // The first snapshot's trace ends with its own entry; the second holds both, in order.
  const PyValue::Items& t1 = first.at("device_traces").item(0).items();
  REQUIRE_EQ(t1.size(), 4);  // alloc (in the small segment `before` made), segment_alloc, alloc
  const PyValue& entry = t1.back();
  CHECK_EQ(entry.at("action").as_str(), "snapshot");
  CHECK_EQ(entry.at("addr").as_int(), 0);
  CHECK_EQ(entry.at("size").as_int(), static_cast<int64_t>(active));
  CHECK_EQ(entry.at("stream").as_int(), 0);
  CHECK(entry.find("frames") == nullptr);
  std::vector<std::string> actions;
  for (const PyValue& e : second.at("device_traces").item(0).items()) {
    actions.push_back(e.at("action").as_str());
  }
  CHECK_EQ(actions, std::vector<std::string>{"alloc", "segment_alloc", "alloc", "snapshot",
                                             "free_requested", "free_completed", "snapshot"});
  CHECK_EQ(second.at("device_traces").item(0).items().back().at("size").as_int(),
           static_cast<int64_t>(3072 + 1024));
  // The recorder holds the entries too (a trace written at exit shows them), with the totals.
  const std::vector<TraceEvent> events = a->trace().events();
  CHECK_EQ(events.back().action, TraceAction::Snapshot);
  CHECK_EQ(events.back().nbytes, 3072 + 1024);
  CHECK_EQ(events.back().allocated, static_cast<int64_t>(a->memory_allocated()));
  CHECK_EQ(events.back().reserved, static_cast<int64_t>(a->memory_reserved()));
  // Imported, the entries are no requests: the same requests as without them.
  const ImportedSnapshot imported = import_snapshot(second);
  CHECK_EQ(imported.snapshot_markers, 2);
  CHECK(imported.notes.empty());
  for (const TraceEvent& e : imported.events) CHECK(e.action != TraceAction::Snapshot);
  const ReplayPlan plan = plan_replay(imported.events);
  CHECK_EQ(plan.allocs, 3);  // `before` (live at time zero), small, large
  CHECK_EQ(plan.frees, 1);
  a->free(small);
  a->free(before);
}

TEST_CASE("a trace written with snapshot entries reads back and replays as without them") {
  BoundedMemory memory(kCapacity, "sim:0");
  std::unique_ptr<PolicyAllocator> a = make_allocator(AllocatorConfig{}, memory);
  a->trace().enable();
  run_workload(*a);
  const size_t before = a->trace().size();
  const ReplayPlan without = plan_replay(a->trace().events());
  (void)memory_snapshot(*a, AllocatorConfig{}, 0);
  REQUIRE_EQ(a->trace().size(), before + 1);
  const RecordedTrace read = parse_trace(trace_to_json(a->trace(), "sim:0", "caching", kCapacity));
  CHECK_EQ(read.events.back().action, TraceAction::Snapshot);
  const ReplayPlan with = plan_replay(read.events);
  CHECK_EQ(with.ops.size(), without.ops.size());
  CHECK_EQ(with.ideal_peak, without.ideal_peak);
}

TEST_CASE("a snapshot after the ring buffer overflowed says so and still replays identically") {
  BoundedMemory memory(kCapacity, "sim:0");
  std::unique_ptr<PolicyAllocator> a = make_allocator(AllocatorConfig{}, memory);
  a->trace().enable(64);  // record_memory_history(device, 64)
  run_workload(*a);
  const PyValue s = memory_snapshot(*a, AllocatorConfig{}, 0);
  const PyValue& settings = s.at("allocator_settings");
  CHECK(settings.at("trace_alloc_overflowed").as_bool());
  CHECK_EQ(settings.at("trace_alloc_max_entries").as_int(), 64);
  const PyValue::Items& trace = s.at("device_traces").item(0).items();
  CHECK_EQ(trace.size(), 64);
  CHECK_EQ(trace.back().at("action").as_str(), "snapshot");
  const ImportedSnapshot imported = import_snapshot(s);
  std::string notes;
  for (const std::string& n : imported.notes) notes += n + "\n";
  CHECK_MESSAGE(notes.find("the trace's ring buffer overflowed") != std::string::npos, notes);
  CHECK(imported.live_before_history > 0);  // blocks whose alloc the ring lost
  const ReplayResult replayed = replay(plan_replay(imported.events), imported.config,
                                       imported.capacity, {.record_trace = true});
  CHECK_FALSE(replayed.oom);
}

TEST_CASE("lab replay tells a snapshot from a trace by the first 4 KiB of the file") {
  BoundedMemory memory(kCapacity, "sim:0");
  std::unique_ptr<PolicyAllocator> a = make_allocator(AllocatorConfig{}, memory);
  a->trace().enable();
  run_workload(*a);
  const std::string json = memory_snapshot(*a, AllocatorConfig{}, 0).to_json().dump();
  const std::string trace = trace_to_json(a->trace(), "sim:0", "caching", kCapacity);
  // memgrad writes a snapshot's keys sorted: "device_traces" comes before "segments", which may
  // lie beyond the first 4 KiB.
  REQUIRE(json.find("\"segments\"") > 4096);
  CHECK(is_snapshot_bytes(std::string_view(json).substr(0, 4096)));
  CHECK(is_snapshot_bytes(record("caching").pickle));
  CHECK_FALSE(is_snapshot_bytes(std::string_view(trace).substr(0, 4096)));
  CHECK(is_snapshot_bytes(R"({"segments": [], "device_traces": []})"));
}

TEST_CASE("every policy's snapshot replays to the same segment decisions and peak") {
  for (const std::string& policy : known_policy_names()) {
    CAPTURE(policy);
    const Recorded r = record(policy);
    const ImportedSnapshot imported = import_snapshot(read_pickle(r.pickle));
    CHECK_EQ(imported.config.policy, policy);
    CHECK_EQ(imported.capacity, kCapacity);
    CHECK_EQ(imported.live_before_history, 0);
    const ReplayPlan plan = plan_replay(imported.events);
    CHECK_EQ(plan.allocs, 300);
    const ReplayResult replayed =
        replay(plan, imported.config, imported.capacity, {.record_trace = true});
    CHECK_FALSE(replayed.oom);
    const auto divergence = compare_segments(imported.recorded_segments, replayed.events);
    const std::string where =
        divergence ? divergence->expected + " recorded, " + divergence->got + " replayed" : "";
    CHECK_MESSAGE(!divergence.has_value(), where);
    CHECK_EQ(replayed.peak_reserved, imported.recorded_peak_reserved);
  }
}

TEST_CASE("a burst of segment frees outside an allocation is read as empty_cache()") {
  const ImportedSnapshot imported = import_snapshot(record("caching").snapshot);
  size_t markers = 0;
  for (const TraceEvent& e : imported.events) markers += e.action == TraceAction::EmptyCache;
  CHECK_EQ(markers, 1);
}

TEST_CASE("empty_cache() right after the last free is read as one under the lab's policies") {
  // B2's order: free a, free b, empty_cache(). Only passthrough (and planned before it has a
  // plan: each request in a segment of its own) gives a segment back at the free of its block;
  // the other policies keep it until empty_cache(), so the burst that follows b's free_completed
  // is an empty_cache() call, and the replay releases both segments too.
  for (const std::string& policy : known_policy_names()) {
    CAPTURE(policy);
    BoundedMemory memory(kCapacity, "sim:0");
    AllocatorConfig config;
    config.policy = policy;
    std::unique_ptr<PolicyAllocator> a = make_allocator(config, memory);
    a->trace().enable();
    const Block x = a->allocate(12 * kMiB);
    const Block y = a->allocate(16 * kMiB);
    a->free(x);
    a->free(y);
    a->mark_in_trace(TraceAction::EmptyCache);
    a->empty_cache();
    const ImportedSnapshot imported = import_snapshot(memory_snapshot(*a, config, 0));
    size_t markers = 0;
    for (const TraceEvent& e : imported.events) markers += e.action == TraceAction::EmptyCache;
    CHECK_EQ(markers, policy == "passthrough" || policy == "planned" ? 0 : 1);
    const ReplayResult replayed = replay(plan_replay(imported.events), imported.config,
                                         imported.capacity, {.record_trace = true});
    CHECK_FALSE(compare_segments(imported.recorded_segments, replayed.events).has_value());
    CHECK_EQ(replayed.peak_reserved, imported.recorded_peak_reserved);
  }
}

TEST_CASE("the segment frees of one burst are compared whatever their order") {
  const auto seg = [](TraceAction action, uint64_t nbytes) {
    TraceEvent e;
    e.action = action;
    e.nbytes = nbytes;
    return e;
  };
  const TraceAction alloc = TraceAction::SegmentAlloc, free = TraceAction::SegmentFree;
  const std::vector<TraceEvent> recorded = {seg(alloc, 12), seg(alloc, 16), seg(free, 16),
                                            seg(free, 12), seg(alloc, 4)};
  // A device that placed the segments elsewhere releases them in another address order.
  CHECK_FALSE(compare_segments(recorded, {seg(alloc, 12), seg(alloc, 16), seg(free, 12),
                                          seg(free, 16), seg(alloc, 4)})
                  .has_value());
  // Frees in different bursts are decisions: their order counts.
  const auto d = compare_segments(
      recorded, {seg(alloc, 12), seg(alloc, 16), seg(free, 12), seg(alloc, 4), seg(free, 16)});
  REQUIRE(d.has_value());
  CHECK_EQ(d->index, 3);
  CHECK_EQ(d->expected, "segment_free 16");
  CHECK_EQ(d->got, "segment_alloc 4");
}

TEST_CASE("blocks allocated before the history began are live at time zero") {
  BoundedMemory memory(kCapacity, "sim:0");
  std::unique_ptr<PolicyAllocator> a = make_allocator(AllocatorConfig{}, memory);
  const Block early = a->allocate(3000);     // before recording
  const Block kept = a->allocate(5 * kMiB);  // before recording, live at the end
  a->trace().enable();
  const Block later = a->allocate(1000);
  a->free(early);
  const ImportedSnapshot imported = import_snapshot(memory_snapshot(*a, AllocatorConfig{}, 0));
  CHECK_EQ(imported.live_before_history, 2);
  CHECK_EQ(imported.frees_before_history, 1);
  REQUIRE(imported.events.size() >= 2);
  CHECK_EQ(imported.events[0].action, TraceAction::Alloc);
  CHECK_EQ(imported.events[0].requested, 3000);
  CHECK_EQ(imported.events[1].requested, 5 * kMiB);
  const ReplayPlan plan = plan_replay(imported.events);
  CHECK_EQ(plan.allocs, 3);
  CHECK_EQ(plan.frees, 1);
  a->free(kept);
  a->free(later);
}

TEST_CASE("what a replay cannot model is named in a note") {
  const PyValue frame = PyValue::dict({{"filename", "train.py"}, {"line", 3}, {"name", "f"}});
  auto entry = [&](const char* action, int64_t addr, int64_t size, int64_t stream) {
    return PyValue::dict({{"action", action},
                          {"addr", addr},
                          {"size", size},
                          {"stream", stream},
                          {"frames", PyValue::list({frame})}});
  };
  const PyValue s = PyValue::dict({
      {"segments", PyValue::list({PyValue::dict(
                       {{"device", 0},
                        {"address", 1 << 21},
                        {"total_size", 2 << 20},
                        {"stream", 0},
                        {"segment_pool_id", PyValue::tuple({1, 2})},
                        {"blocks", PyValue::list({PyValue::dict(
                                       {{"size", 2 << 20}, {"state", "inactive"}})})}})})},
      {"device_traces",
       PyValue::list({PyValue::list(
           {entry("segment_alloc", 1 << 21, 2 << 20, 0), entry("alloc", 1 << 21, 512, 0),
            entry("alloc", (1 << 21) + 512, 512, 77), entry("snapshot", 0, 0, 0),
            entry("free_completed", 1 << 21, 512, 0),
            entry("free_completed", (1 << 21) + 512, 512, 77)})})},
      {"allocator_settings",
       PyValue::dict({{"expandable_segments", true}, {"trace_alloc_overflowed", true}})},
  });
  const ImportedSnapshot imported = import_snapshot(s);
  std::string notes;
  for (const std::string& n : imported.notes) notes += n + "\n";
  CAPTURE(notes);
  CHECK(notes.find("private pools") != std::string::npos);
  CHECK(notes.find("2 streams allocate") != std::string::npos);
  CHECK(notes.find("ring buffer overflowed") != std::string::npos);
  CHECK(notes.find("expandable_segments") != std::string::npos);
  CHECK(notes.find("snapshot") == std::string::npos);  // a snapshot entry leaves nothing out
  CHECK_EQ(imported.snapshot_markers, 1);
  CHECK_EQ(imported.device_name, "cuda:0");
  CHECK_EQ(imported.contexts.back().op, "train.py");
}

TEST_CASE("allocator settings memgrad lacks are named in one note, with the choice made") {
  const auto notes_of = [](PyValue::Entries settings) {
    const PyValue s = PyValue::dict({{"segments", PyValue::list()},
                                     {"device_traces", PyValue::list({PyValue::list()})},
                                     {"allocator_settings", PyValue::dict(std::move(settings))}});
    return import_snapshot(s);
  };
  // PyTorch's defaults: nothing to say.
  const PyValue::Entries defaults = {
      {"PYTORCH_CUDA_ALLOC_CONF", ""},          {"max_split_size", -1},
      {"garbage_collection_threshold", 0.0},    {"expandable_segments", false},
      {"pinned_num_register_threads", 1},       {"release_lock_on_cudamalloc", false},
      {"pinned_use_cuda_host_register", false}, {"graph_capture_record_stream_reuse", false}};
  CHECK(notes_of(defaults).notes.empty());
  const ImportedSnapshot set =
      notes_of({{"PYTORCH_CUDA_ALLOC_CONF",
                 "backend:native,roundup_power2_divisions:[256:1,>:4],max_non_split_rounding_mb:64,"
                 "pinned_use_background_threads:True"},
                {"max_split_size", "64"},
                {"release_lock_on_cudamalloc", true},
                {"pinned_num_register_threads", 8},
                {"pinned_use_cuda_host_register", true},
                {"graph_capture_record_stream_reuse", true},
                {"future_knob", 3}});
  REQUIRE_EQ(set.notes.size(), 1);
  CHECK_EQ(set.notes[0],
           "allocator settings memgrad does not model, ignored (the replay runs as if they were "
           "unset): PYTORCH_CUDA_ALLOC_CONF pinned_use_background_threads:True, "
           "max_split_size='64' (expected an int), release_lock_on_cudamalloc=True (locking "
           "around cudaMalloc), pinned_num_register_threads=8 (pinned host memory), "
           "pinned_use_cuda_host_register=True (pinned host memory), "
           "graph_capture_record_stream_reuse=True (CUDA graph capture), future_knob=3 (unknown "
           "to memgrad)");
  CHECK_EQ(set.config.max_split_size, SIZE_MAX);                // the mistyped setting: its default
  CHECK_EQ(set.config.max_non_split_rounding_size, 64 * kMiB);  // only the text carries it
  // cudaMallocAsync served the run: a line of its own, the replay still uses caching.
  const ImportedSnapshot async = notes_of({{"PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync"}});
  REQUIRE_EQ(async.notes.size(), 1);
  CHECK(
      async.notes[0].starts_with("PYTORCH_CUDA_ALLOC_CONF backend:cudaMallocAsync: the run was "
                                 "served by CUDA's stream-ordered allocator"));
  CHECK_EQ(async.config.policy, "caching");
  // memgrad's own snapshot: its configuration text is memgrad's, every key modelled.
  BoundedMemory memory(kCapacity, "sim:0");
  AllocatorConfig config = AllocatorConfig::parse("policy:caching,max_split_size_mb:64");
  std::unique_ptr<PolicyAllocator> a = make_allocator(config, memory);
  a->trace().enable();
  run_workload(*a);
  const ImportedSnapshot own = import_snapshot(memory_snapshot(*a, config, 0));
  CHECK(own.notes.empty());
  CHECK_EQ(own.config.max_split_size, 64 * kMiB);
  // A fraction no device has is refused with expandable segments too (not cast to a size).
  for (double fraction : {1e300, std::nan(""), -1.0}) {
    CAPTURE(fraction);
    CHECK_THROWS_WITH_AS(
        notes_of({{"expandable_segments", true}, {"per_process_memory_fraction", fraction}}),
        doctest::Contains("per_process_memory_fraction"), TraceError);
  }
}

TEST_CASE("a malformed snapshot is a TraceError naming the place and the value") {
  auto with_trace = [](PyValue event) {
    return PyValue::dict({{"segments", PyValue::list()},
                          {"device_traces", PyValue::list({PyValue::list({std::move(event)})})}});
  };
  CHECK(import_error(PyValue::list()).find("a list, expected a dict") != std::string::npos);
  CHECK(import_error(PyValue::dict({{"segments", PyValue::list()}})).find("no \"device_traces\"") !=
        std::string::npos);
  CHECK(import_error(with_trace(PyValue::dict({{"action", "alloc"}, {"addr", 0}, {"size", -1}})))
            .find("device_traces[0][0]: \"size\" is -1") != std::string::npos);
  CHECK(import_error(with_trace(PyValue::dict({{"action", "alloc"}, {"addr", "x"}, {"size", 1}})))
            .find("\"addr\" is a str, expected an int") != std::string::npos);
  CHECK(import_error(with_trace(PyValue::dict({{"action", "explode"}, {"addr", 0}, {"size", 1}})))
            .find("unknown action 'explode'") != std::string::npos);
  CHECK(import_error(with_trace(PyValue::dict(
                         {{"action", "alloc"}, {"addr", 0}, {"size", int64_t{1} << 61}})))
            .find("above 1 EiB") != std::string::npos);
  const PyValue bad_tiling = PyValue::dict(
      {{"segments", PyValue::list({PyValue::dict(
                        {{"device", 0},
                         {"address", 0},
                         {"total_size", 4096},
                         {"stream", 0},
                         {"blocks", PyValue::list({PyValue::dict(
                                        {{"size", 512}, {"state", "inactive"}})})}})})},
       {"device_traces", PyValue::list({PyValue::list()})}});
  CHECK(import_error(bad_tiling).find("segments[0]: block sizes sum to 512, total_size is 4096") !=
        std::string::npos);
}

TEST_CASE("a replay starts from the segments the history started with, wholly free ones too") {
  // As PyTorch records after warm-up: a 20 MiB segment cached and wholly free when recording
  // began serves a 5 MiB request (no segment_alloc), then empty_cache() releases it; a 2 MiB
  // segment of stream 7 holds a block from before the history at its end and stays.
  const int64_t big = int64_t{1} << 40, small = big + (64 << 20);
  const auto event = [](const char* action, int64_t addr, int64_t size, int64_t stream) {
    return PyValue::dict({{"action", action}, {"addr", addr}, {"size", size}, {"stream", stream}});
  };
  const PyValue kept_segment = PyValue::dict(
      {{"device", 0},
       {"address", small},
       {"total_size", 2 << 20},
       {"stream", 7},
       {"segment_type", "small"},
       {"blocks",
        PyValue::list(
            {PyValue::dict(
                 {{"size", 4096}, {"requested_size", 4000}, {"state", "active_allocated"}}),
             PyValue::dict({{"size", (2 << 20) - 4096}, {"state", "inactive"}})})}});
  const PyValue snapshot =
      PyValue::dict({{"segments", PyValue::list({kept_segment})},
                     {"device_traces",
                      PyValue::list({PyValue::list({event("alloc", big, 5 << 20, 0),
                                                    event("free_requested", big, 5 << 20, 0),
                                                    event("free_completed", big, 5 << 20, 0),
                                                    event("segment_free", big, 20 << 20, 0)})})}});
  const ImportedSnapshot imported = import_snapshot(snapshot);
  REQUIRE(imported.start.has_value());
  REQUIRE_EQ(imported.start->segments.size(), 2);
  const SeedSegment& first = imported.start->segments[0];
  CHECK_EQ(first.nbytes, 20 << 20);
  CHECK_FALSE(first.small_pool);
  REQUIRE_EQ(first.blocks.size(), 1);
  CHECK_FALSE(first.blocks[0].allocated);
  const SeedSegment& second = imported.start->segments[1];
  CHECK_EQ(second.stream, 7);
  CHECK(second.small_pool);
  REQUIRE_EQ(second.blocks.size(), 2);
  CHECK(second.blocks[0].allocated);
  CHECK_EQ(second.blocks[0].requested, 4000);
  CHECK_EQ(imported.start->alloc_events, std::vector<size_t>{0});
  CHECK_EQ(imported.recorded_peak_reserved, 22 << 20);
  // From that state the replay makes the recorded decisions: no segment for the 5 MiB request,
  // and empty_cache() releasing the 20 MiB one.
  const ReplayPlan plan = plan_replay(imported.events);
  const ReplayResult from_start =
      replay(plan, imported.config, 256 * kMiB, {.record_trace = true, .start = &*imported.start});
  CHECK_EQ(from_start.start_refused, "");
  CHECK_FALSE(compare_segments(imported.recorded_segments, from_start.events).has_value());
  CHECK_EQ(from_start.peak_reserved, 22 << 20);
  // From an empty device it makes a segment the recording never made.
  const ReplayResult from_empty = replay(plan, imported.config, 256 * kMiB, {.record_trace = true});
  const std::optional<SegmentDivergence> d =
      compare_segments(imported.recorded_segments, from_empty.events);
  REQUIRE(d.has_value());
  CHECK_EQ(d->expected, "segment_free 20971520");
  CHECK_EQ(d->got, "segment_alloc 2097152");
  // A policy that cannot make segments to order says so and serves nothing.
  AllocatorConfig passthrough;
  passthrough.policy = "passthrough";
  const ReplayResult refused = replay(plan, passthrough, 256 * kMiB, {.start = &*imported.start});
  CHECK_EQ(refused.start_refused,
           "the passthrough policy cannot recreate a segment of 20971520 bytes");
  CHECK_EQ(refused.allocs, 0);
}

TEST_CASE(
    "a release of the cache before a segment that did not fit replays on a device of the peak") {
  // Recorded without a capacity: a 40 MiB segment holds a live block; a 20 MiB one of stream 0
  // is cached, wholly free. A 30 MiB request on stream 1 fits in no free block of its stream,
  // its cudaMalloc fails, PyTorch releases the cache (segment_free, no request) and retries. On a
  // device of the peak reserved (40 + 30 MiB) the replay fails and retries at the same request;
  // on a larger one it would not release anything.
  const int64_t a = int64_t{1} << 40, b = a + (64 << 20), c = a + (128 << 20);
  const auto event = [](const char* action, int64_t addr, int64_t size, int64_t stream) {
    return PyValue::dict({{"action", action}, {"addr", addr}, {"size", size}, {"stream", stream}});
  };
  const auto segment = [](int64_t address, int64_t total, int64_t stream, int64_t used) {
    return PyValue::dict(
        {{"device", 0},
         {"address", address},
         {"total_size", total},
         {"stream", stream},
         {"segment_type", "large"},
         {"blocks",
          PyValue::list({PyValue::dict(
              {{"size", used}, {"requested_size", used}, {"state", "active_allocated"}})})}});
  };
  const PyValue snapshot = PyValue::dict(
      {{"segments",
        PyValue::list({segment(a, 40 << 20, 0, 40 << 20), segment(c, 30 << 20, 1, 30 << 20)})},
       {"device_traces", PyValue::list({PyValue::list({event("segment_free", b, 20 << 20, 0),
                                                       event("segment_alloc", c, 30 << 20, 1),
                                                       event("alloc", c, 30 << 20, 1)})})}});
  const ImportedSnapshot imported = import_snapshot(snapshot);
  REQUIRE(imported.start.has_value());
  CHECK_EQ(imported.start->segments.size(), 2);
  CHECK_EQ(imported.capacity, 70 << 20);
  REQUIRE_FALSE(imported.notes.empty());
  CHECK(imported.notes.back().find("taken as the peak reserved, 73400320 bytes (1 release") !=
        std::string::npos);
  const ReplayPlan plan = plan_replay(imported.events);
  for (size_t capacity : {imported.capacity, size_t{256} << 20}) {
    CAPTURE(capacity);
    const ReplayResult r =
        replay(plan, imported.config, capacity, {.record_trace = true, .start = &*imported.start});
    const std::optional<SegmentDivergence> d =
        compare_segments(imported.recorded_segments, r.events);
    CHECK_EQ(d.has_value(), capacity != imported.capacity);
    CHECK_EQ(r.stats.num_alloc_retries, capacity == imported.capacity ? 1 : 0);
  }
}

TEST_CASE("the start state is not rebuilt where the history cannot be walked back exactly") {
  const auto event = [](const char* action, int64_t addr, int64_t size) {
    return PyValue::dict({{"action", action}, {"addr", addr}, {"size", size}, {"stream", 0}});
  };
  // A segment_alloc of a segment the final segments do not hold.
  const ImportedSnapshot contradicted = import_snapshot(PyValue::dict(
      {{"segments", PyValue::list()},
       {"device_traces",
        PyValue::list({PyValue::list({event("segment_alloc", 1 << 30, 2 << 20)})})}}));
  CHECK_FALSE(contradicted.start.has_value());
  CHECK(contradicted.start_note.find("a segment_alloc of 2097152 bytes at 0x40000000") !=
        std::string::npos);
  // Expandable segments: mapped page by page.
  const ImportedSnapshot mapped = import_snapshot(PyValue::dict(
      {{"segments", PyValue::list()},
       {"device_traces",
        PyValue::list({PyValue::list({event("segment_map", 1 << 30, 2 << 20),
                                      event("segment_unmap", 1 << 30, 2 << 20)})})}}));
  CHECK_FALSE(mapped.start.has_value());
  CHECK_EQ(mapped.start_note, "expandable segments are mapped page by page");
}

TEST_CASE("a frame's line of 2^64 - 1 imports; a big int where a size is read names the field") {
  // A real snapshot's frame, line 2^64 - 1 (an unknown line, as the C++ unwinder reports it).
  const PyValue line =
      read_pickle(std::string("\x80\x02\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00.", 14));
  const PyValue frame = PyValue::dict({{"filename", "??"}, {"line", line}, {"name", "f"}});
  const auto alloc = [&](PyValue size) {
    return PyValue::dict({{"action", "alloc"},
                          {"addr", 4096},
                          {"size", std::move(size)},
                          {"stream", 0},
                          {"frames", PyValue::list({frame})}});
  };
  const auto snapshot = [](PyValue event) {
    return PyValue::dict({{"segments", PyValue::list()},
                          {"device_traces", PyValue::list({PyValue::list({std::move(event)})})}});
  };
  const ImportedSnapshot imported =
      import_snapshot(read_pickle(write_pickle(snapshot(alloc(512)), 2)));
  REQUIRE_EQ(imported.events.size(), 1);
  CHECK_EQ(imported.events[0].nbytes, 512);
  try {
    import_snapshot(snapshot(alloc(line)));
    FAIL("a size outside int64 was read");
  } catch (const TraceError& e) {
    CHECK(std::string(e.what()).find("device_traces[0][0]: \"size\" is a big int, "
                                     "expected an int") != std::string::npos);
  }
}

TEST_CASE("segment sizes near 2^62 are refused where their sums would pass 2^62, not wrapped") {
  const int64_t huge = int64_t{1} << 62;
  const auto segment = [](int64_t address, std::vector<int64_t> block_sizes) {
    PyValue::Items blocks;
    int64_t total = 0;
    for (int64_t size : block_sizes) {
      blocks.push_back(PyValue::dict({{"size", size}, {"state", "inactive"}}));
      total += size;
    }
    return PyValue::dict({{"device", 0},
                          {"address", address},
                          {"total_size", total},
                          {"stream", 0},
                          {"blocks", PyValue::list(std::move(blocks))}});
  };
  const auto event = [](const char* action, int64_t size) {
    return PyValue::dict({{"action", action}, {"addr", 0}, {"size", size}, {"stream", 0}});
  };
  const auto snapshot = [](PyValue::Items segments, PyValue::Items events) {
    return PyValue::dict({{"segments", PyValue::list(std::move(segments))},
                          {"device_traces", PyValue::list({PyValue::list(std::move(events))})}});
  };
  // Two segments of 2^62 at the end: 2^63 reserved.
  CHECK(import_error(snapshot({segment(0, {huge}), segment(huge, {huge})}, {}))
            .find("segments[1]: more than 2^62 bytes reserved at once") != std::string::npos);
  // One at the end, two freed before it was made: 2^63 at the start, walked back.
  CHECK(import_error(snapshot({segment(0, {huge})},
                              {event("segment_free", huge), event("segment_free", huge),
                               event("segment_alloc", huge)}))
            .find("the start of device_traces (the segments walked back): more than 2^62 bytes "
                  "reserved") != std::string::npos);
  // The start is empty, the peak in the middle is 2^63.
  CHECK(import_error(snapshot({}, {event("segment_alloc", huge), event("segment_alloc", huge),
                                   event("segment_free", huge), event("segment_free", huge)}))
            .find("device_traces (the segment events from the start): more than 2^62") !=
        std::string::npos);
  // Block sizes that sum to the total only modulo 2^64: named at the first block past it.
  PyValue::Items blocks;
  for (int64_t size : {huge, huge, huge, huge, int64_t{4096}}) {
    blocks.push_back(PyValue::dict({{"size", size}, {"state", "inactive"}}));
  }
  const PyValue wrapped = PyValue::dict({{"device", 0},
                                         {"address", 0},
                                         {"total_size", 4096},
                                         {"stream", 0},
                                         {"blocks", PyValue::list(std::move(blocks))}});
  CHECK(import_error(snapshot({wrapped}, {}))
            .find("segments[0].blocks[0]: the blocks up to this one hold more than the segment's "
                  "total_size, 4096") != std::string::npos);
}

TEST_CASE("mutated snapshot pickles are read and imported, or refused with a typed error") {
  const std::string good = record("caching").pickle;
  std::mt19937_64 rng(5);
  size_t refused = 0, imported = 0;
  auto attempt = [&](const std::string& bytes) {
    try {
      const ImportedSnapshot s = import_snapshot(read_pickle(bytes));
      plan_replay(s.events);
      ++imported;
    } catch (const Error&) {  // PickleError, PyValueError, TraceError
      ++refused;
    }
  };
  for (size_t cut = 0; cut < good.size(); cut += 97) attempt(good.substr(0, cut));
  for (int i = 0; i < 1500; ++i) {
    std::string bytes = good;
    for (int k = 0; k < 3; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    attempt(bytes);
  }
  CHECK(refused > 0);
  CHECK(imported > 0);  // many mutations hit a value, not the structure
}

}  // TEST_SUITE("interop")
