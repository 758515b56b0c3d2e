// Trace replay: the plan read from a trace, and the shipped traces (traces/*.json, recorded from
// the training programs and the fragmenter by tools/make_traces.py) served by every policy.
//
// What must hold whatever the policy: it serves the same requests (the same number of allocs and
// frees), its peaks are at least the ideal (the most live requested bytes at any moment), and on
// a device too small for the trace it reports the OutOfMemoryError with the trace event it
// happened at instead of failing.
#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "allocator/bounded_memory.h"
#include "allocator/caching_allocator.h"
#include "allocator/error.h"
#include "interop/error.h"
#include "interop/trace_reader.h"
#include "interop/trace_writer.h"
#include "lab/policies/expandable_allocator.h"
#include "lab/trace_replay.h"
#include "tests/support/allocator_invariants.h"

using namespace memgrad;
using memgrad::testing::known_policy_names;

namespace {

const std::vector<std::string> kShippedTraces = {"mlp_step.json", "charlm_step.json",
                                                 "fragmentation.json"};

std::string trace_path(const std::string& name) {
  return std::string(MEMGRAD_SOURCE_ROOT) + "/traces/" + name;
}

// Serves `plan` on `allocator` (no OOM expected) and returns its peak reserved bytes.
size_t peak_reserved_serving(const ReplayPlan& plan, PolicyAllocator& allocator) {
  std::vector<Block> slots(plan.slots);
  for (const ReplayOp& op : plan.ops) {
    if (op.empty_cache) {
      allocator.empty_cache();
    } else if (op.alloc) {
      slots[op.slot] = allocator.allocate(op.nbytes, op.stream);
    } else {
      allocator.free(slots[op.slot]);
      slots[op.slot] = Block{};
    }
  }
  for (const Block& b : slots) allocator.free(b);
  return static_cast<size_t>(allocator.stats().reserved_bytes.all().peak);
}

TraceEvent event(TraceAction action, uint64_t address, uint64_t requested) {
  TraceEvent e;
  e.action = action;
  e.address = address;
  e.requested = requested;
  e.nbytes = (requested + 511) / 512 * 512;
  return e;
}

AllocatorConfig config_for(const std::string& policy) {
  AllocatorConfig c;
  c.policy = policy;
  return c;
}

}  // namespace

TEST_SUITE("lab") {

TEST_CASE("a replay plan matches frees to allocs by address and skips what it cannot match") {
  const std::vector<TraceEvent> events = {event(TraceAction::SegmentAlloc, 0, 0),
                                          event(TraceAction::Alloc, 0, 1000),
                                          event(TraceAction::Alloc, 1024, 3000),
                                          event(TraceAction::FreeRequested, 0, 1000),
                                          event(TraceAction::FreeCompleted, 0, 1000),
                                          event(TraceAction::FreeRequested, 9999, 10),
                                          event(TraceAction::Alloc, 0, 500),
                                          event(TraceAction::Oom, 0, 5000),
                                          event(TraceAction::FreeRequested, 1024, 3000)};
  const ReplayPlan plan = plan_replay(events);
  CHECK_EQ(plan.allocs, 3);
  CHECK_EQ(plan.frees, 2);
  CHECK_EQ(plan.unmatched_frees, 1);  // allocated before the trace began
  CHECK_EQ(plan.live_at_end, 1);      // the 500-byte block
  CHECK_EQ(plan.slots, 2);            // the freed slot was reused
  CHECK_EQ(plan.ideal_peak, 4000);    // 1000 + 3000 live at once
  REQUIRE_EQ(plan.ops.size(), 5);
  CHECK_EQ(plan.ops[2].event, 3);  // the free of address 0 is event 3
  CHECK_FALSE(plan.ops[2].alloc);
  CHECK_EQ(plan.ops[2].slot, plan.ops[0].slot);
  CHECK_EQ(plan.ops[3].nbytes, 500);
}

TEST_CASE("a trace written by the recorder reads back with the same events and contexts") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  CachingAllocator alloc(memory);
  alloc.trace().enable();
  {
    TracePhaseScope phase("forward");
    TraceOpScope op("matmul");
    const Block a = alloc.allocate(4000);
    alloc.free(a);
  }
  const RecordedTrace t = parse_trace(trace_to_json(alloc.trace(), "sim:0", "caching", 64 * kMiB));
  CHECK_EQ(t.device, "sim:0");
  CHECK_EQ(t.policy, "caching");
  CHECK_EQ(t.capacity, 64 * kMiB);
  const std::vector<TraceEvent> original = alloc.trace().events();
  REQUIRE_EQ(t.events.size(), original.size());
  for (size_t i = 0; i < original.size(); ++i) {
    CAPTURE(i);
    CHECK_EQ(trace_action_name(t.events[i].action), trace_action_name(original[i].action));
    CHECK_EQ(t.events[i].address, original[i].address);
    CHECK_EQ(t.events[i].requested, original[i].requested);
    CHECK_EQ(t.events[i].allocated, original[i].allocated);
    CHECK_EQ(t.events[i].context, original[i].context);
  }
  REQUIRE_EQ(t.contexts.size(), alloc.trace().contexts().size());
  CHECK_EQ(t.contexts[t.events[1].context].phase, "forward");
  CHECK_EQ(t.contexts[t.events[1].context].op, "matmul");
  CHECK_THROWS_WITH_AS(parse_trace("{\"traceEvents\": []}"), doctest::Contains("memgrad_events"),
                       Error);
  CHECK_THROWS_WITH_AS(read_trace_file("/nonexistent/trace.json"),
                       doctest::Contains("/nonexistent/trace.json"), Error);
}

TEST_CASE("the recorder's own layout is read directly, with what the JSON reader reads") {
  auto same = [](const RecordedTrace& a, const RecordedTrace& b) {
    if (a.device != b.device || a.policy != b.policy || a.capacity != b.capacity ||
        a.events.size() != b.events.size() || a.contexts.size() != b.contexts.size()) {
      return false;
    }
    for (size_t i = 0; i < a.events.size(); ++i) {
      const TraceEvent &x = a.events[i], &y = b.events[i];
      if (x.action != y.action || x.stream != y.stream || x.time_ns != y.time_ns ||
          x.address != y.address || x.nbytes != y.nbytes || x.requested != y.requested ||
          x.allocated != y.allocated || x.reserved != y.reserved || x.context != y.context) {
        return false;
      }
    }
    for (size_t i = 0; i < a.contexts.size(); ++i) {
      const TraceContextRecord &x = a.contexts[i], &y = b.contexts[i];
      if (x.phase != y.phase || x.op != y.op || x.label != y.label || x.module != y.module) {
        return false;
      }
    }
    return true;
  };
  // The shipped traces: recorder output, read directly, identical to the JSON reader's result.
  for (const std::string& name : kShippedTraces) {
    CAPTURE(name);
    const RecordedTrace t = read_trace_file(trace_path(name));
    const std::string json = trace_to_json(t.events, t.contexts, t.device, t.policy, t.capacity);
    const std::optional<RecordedTrace> direct = detail::parse_canonical_trace(json);
    REQUIRE(direct.has_value());
    CHECK(same(*direct, detail::parse_trace_general(json)));
    CHECK(same(*direct, t));
  }
  // Escapes and UTF-8 in a context are left to the JSON reader, which parse_trace falls back to.
  BoundedMemory memory(64 * kMiB, "sim:0");
  CachingAllocator alloc(memory);
  alloc.trace().enable();
  {
    // Modules and names: read directly too (the names are checked, not kept).
    TraceModuleScope module(intern_trace_string("blocks.0.attn"));
    const Block b = alloc.allocate(4000);
    alloc.name_in_trace(b.ptr, "blocks.0.attn", "parameter");
    const std::string json = trace_to_json(alloc.trace(), "sim:0", "caching", 64 * kMiB);
    CHECK_NE(json.find("\"memgrad_names\":[{\"addr\":0,\"event\":2,\"module\":"
                       "\"blocks.0.attn\",\"role\":\"parameter\"}]"),
             std::string::npos);
    const std::optional<RecordedTrace> direct = detail::parse_canonical_trace(json);
    REQUIRE(direct.has_value());
    CHECK(same(*direct, detail::parse_trace_general(json)));
    CHECK_EQ(direct->contexts.at(0).module, "blocks.0.attn");
    alloc.free(b);
    alloc.trace().clear();
  }
  {
    TraceOpScope op("say \"hi\"\tthen caf\u00e9");
    alloc.free(alloc.allocate(4000));
  }
  const std::string escaped = trace_to_json(alloc.trace(), "sim:0", "caching", 64 * kMiB);
  CHECK_FALSE(detail::parse_canonical_trace(escaped).has_value());
  const RecordedTrace t = parse_trace(escaped);
  CHECK(same(t, detail::parse_trace_general(escaped)));
  CHECK_EQ(t.contexts[t.events.back().context].op, "say \"hi\"\tthen caf\u00e9");
  // A value the checks refuse: the direct reader gives up, the JSON reader words the error.
  const RecordedTrace mlp = read_trace_file(trace_path("mlp_step.json"));
  const std::string json =
      trace_to_json(mlp.events, mlp.contexts, mlp.device, mlp.policy, mlp.capacity);
  const std::string t_ns = fmt::format("\"t_ns\":{}}}", mlp.events[5].time_ns);
  const size_t at = json.find(t_ns);
  REQUIRE(at != std::string::npos);
  for (const std::string& bad :
       {std::string("\"t_ns\":-1}"), std::string("\"t_ns\":1.5}"), std::string("\"t_ns\":01}"),
        std::string("\"t_ns\": 99999999999999999999}"),
        std::string("\"t_ns\":0}")}) {  // before event 4
    CAPTURE(bad);
    std::string broken = json;
    broken.replace(at, t_ns.size(), bad);
    CHECK_FALSE(detail::parse_canonical_trace(broken).has_value());
    std::string general_error;
    try {
      detail::parse_trace_general(broken);
    } catch (const TraceError& e) {
      general_error = e.what();
    }
    CHECK_THROWS_WITH_AS(parse_trace(broken), general_error.c_str(), TraceError);
  }
}

TEST_CASE("every policy serves each shipped trace in full, with peaks at or above the ideal") {
  for (const std::string& name : kShippedTraces) {
    CAPTURE(name);
    const RecordedTrace trace = read_trace_file(trace_path(name));
    const ReplayPlan plan = plan_replay(trace.events);
    REQUIRE_GT(plan.allocs, 10);
    CHECK_EQ(plan.unmatched_frees, 0);  // recorded from the program's start
    // Room for any policy's worst case: four times the ideal, at least 256 MiB.
    const size_t capacity = std::max<size_t>(4 * plan.ideal_peak, 256 * kMiB);
    for (const std::string& policy : known_policy_names()) {
      CAPTURE(policy);
      const ReplayResult r = replay(plan, config_for(policy), capacity);
      CHECK_FALSE(r.oom);
      CHECK_EQ(r.allocs, plan.allocs);
      CHECK_EQ(r.frees, plan.frees);
      CHECK_GE(r.peak_allocated, plan.ideal_peak);
      CHECK_GE(r.peak_reserved, r.peak_allocated);
      CHECK_GE(r.fragmentation_at_peak, 0.0);
      CHECK_LT(r.fragmentation_at_peak, 1.0);
      CHECK_EQ(r.stats.allocation.all().allocated, static_cast<int64_t>(plan.allocs));
      CHECK_EQ(r.stats.allocation.all().current, static_cast<int64_t>(plan.live_at_end));
    }
  }
}

TEST_CASE("a policy that runs out of memory during a replay reports the trace event") {
  for (const std::string& name : kShippedTraces) {
    CAPTURE(name);
    const RecordedTrace trace = read_trace_file(trace_path(name));
    const ReplayPlan plan = plan_replay(trace.events);
    // Half the ideal peak: no policy can serve the trace.
    const size_t capacity = plan.ideal_peak / 2;
    for (const std::string& policy : known_policy_names()) {
      CAPTURE(policy);
      const ReplayResult r = replay(plan, config_for(policy), capacity);
      REQUIRE(r.oom);
      REQUIRE_LT(r.oom_op, plan.ops.size());
      CHECK(plan.ops[r.oom_op].alloc);
      CHECK_EQ(r.oom_event, plan.ops[r.oom_op].event);
      CHECK_EQ(trace_action_name(trace.events[r.oom_event].action), "alloc");
      CHECK_EQ(r.allocs + r.frees, r.oom_op);  // everything before it was served
      CHECK_NE(r.oom_message.find("out of memory"), std::string::npos);
      CHECK_EQ(r.stats.num_ooms, 1);
      CHECK_LE(r.peak_reserved, capacity);
    }
  }
}

TEST_CASE("on the fragmenter, stitch's smaller pages and its moved pages each lower the peak") {
  // What docs/allocator-lab.md says of the stitch policy, term by term: expandable's 20 MiB
  // large pages reserve 62 MiB at the peak; the same policy in 2 MiB pages 52 MiB; moving whole
  // free pages into the run a request needs (stitch) 50 MiB, for 46.19 MiB live at most.
  const ReplayPlan plan = plan_replay(read_trace_file(trace_path("fragmentation.json")).events);
  const auto peak = [&](ExpandableAllocator::PageRules rules) {
    BoundedMemory memory(256 * kMiB, "sim:0");
    ExpandableAllocator allocator(memory, AllocatorConfig{}, rules);
    return peak_reserved_serving(plan, allocator);
  };
  using Rules = ExpandableAllocator::PageRules;
  CHECK_EQ(peak(Rules{}), 62 * kMiB);
  CHECK_EQ(peak(Rules{ExpandableAllocator::kSmallPage, false}), 52 * kMiB);
  CHECK_EQ(peak(ExpandableAllocator::Stitch()), 50 * kMiB);
  CHECK_GE(50 * kMiB, plan.ideal_peak);
}

}  // TEST_SUITE("lab")
