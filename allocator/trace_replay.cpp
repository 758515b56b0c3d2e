// Trace replay: parse, plan (free matched to alloc by address), serve, measure.
#include "allocator/trace_replay.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "allocator/bounded_memory.h"
#include "allocator/error.h"
#include "allocator/policy_registry.h"

namespace memgrad {
namespace {

TraceAction action_from_name(const std::string& name) {
  for (TraceAction a : {TraceAction::Alloc, TraceAction::FreeRequested, TraceAction::FreeCompleted,
                        TraceAction::SegmentAlloc, TraceAction::SegmentFree,
                        TraceAction::SegmentMap, TraceAction::SegmentUnmap, TraceAction::Oom}) {
    if (trace_action_name(a) == name) return a;
  }
  throw Error(fmt::format("trace: unknown action '{}'", name));
}

TraceEvent event_from_json(const nlohmann::json& j, size_t num_contexts) {
  TraceEvent e;
  e.action = action_from_name(j.at("action").get<std::string>());
  e.time_ns = j.at("t_ns").get<int64_t>();
  e.address = j.at("addr").get<uint64_t>();
  e.nbytes = j.at("size").get<uint64_t>();
  e.requested = j.at("requested").get<uint64_t>();
  e.stream = j.at("stream").get<StreamId>();
  e.allocated = j.at("allocated").get<int64_t>();
  e.reserved = j.at("reserved").get<int64_t>();
  e.context = j.at("ctx").get<uint32_t>();
  if (e.context >= num_contexts) {
    throw Error(fmt::format("trace: event refers to context {} of {}", e.context, num_contexts));
  }
  return e;
}

// Sets the phase, op and label of a recorded context on this thread for one request.
class ContextScope {
 public:
  explicit ContextScope(const TraceContextRecord* c)
      : phase_(c != nullptr ? c->phase.c_str() : ""),
        op_(c != nullptr ? c->op.c_str() : ""),
        label_(c != nullptr ? c->label : std::string()) {}

 private:
  TracePhaseScope phase_;
  TraceOpScope op_;
  TraceLabelScope label_;
};

using Clock = std::chrono::steady_clock;

// Serves ops [0, end) on a fresh device without reading stats; returns ns per op.
double timed_pass(const ReplayPlan& plan, const AllocatorConfig& config, size_t capacity,
                  size_t end) {
  BoundedMemory memory(capacity, "sim:0");
  std::unique_ptr<Allocator> alloc = make_allocator(config, memory);
  std::vector<Block> blocks(plan.slots);
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < end; ++i) {
    const ReplayOp& op = plan.ops[i];
    if (op.alloc) {
      blocks[op.slot] = alloc->allocate(op.nbytes, op.stream);
    } else {
      alloc->free(blocks[op.slot]);
    }
  }
  const std::chrono::duration<double, std::nano> elapsed = Clock::now() - start;
  return end == 0 ? 0.0 : elapsed.count() / static_cast<double>(end);
}

}  // namespace

RecordedTrace parse_trace(std::string_view json) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) throw Error("trace: not a JSON object");
  if (!doc.contains("memgrad_events") || !doc.contains("contexts")) {
    throw Error("trace: no \"memgrad_events\" or \"contexts\" (not a memgrad trace?)");
  }
  RecordedTrace t;
  try {
    t.device = doc.value("device", "");
    t.policy = doc.value("policy", "");
    t.capacity = doc.value("capacity", size_t{0});
    for (const nlohmann::json& c : doc.at("contexts")) {
      t.contexts.push_back({c.at("phase").get<std::string>(), c.at("op").get<std::string>(),
                            c.at("label").get<std::string>()});
    }
    for (const nlohmann::json& e : doc.at("memgrad_events")) {
      t.events.push_back(event_from_json(e, t.contexts.size()));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("trace: malformed event or context: {}", e.what()));
  }
  return t;
}

RecordedTrace read_trace_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("trace: cannot open '{}'", path));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return parse_trace(text.str());
  } catch (const Error& e) {
    throw Error(fmt::format("{} (in '{}')", e.what(), path));
  }
}

ReplayPlan plan_replay(const std::vector<TraceEvent>& events) {
  ReplayPlan plan;
  std::map<uint64_t, uint32_t> live;  // address -> slot
  std::vector<size_t> slot_bytes;     // requested bytes of the block in each slot
  std::vector<uint32_t> spare;        // slots free for reuse
  size_t live_bytes = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    if (e.action == TraceAction::Alloc && e.requested > 0) {
      uint32_t slot = 0;
      if (spare.empty()) {
        slot = static_cast<uint32_t>(slot_bytes.size());
        slot_bytes.push_back(0);
      } else {
        slot = spare.back();
        spare.pop_back();
      }
      slot_bytes[slot] = e.requested;
      live[e.address] = slot;
      live_bytes += e.requested;
      plan.ideal_peak = std::max(plan.ideal_peak, live_bytes);
      plan.ops.push_back({true, slot, e.requested, e.stream, i});
      plan.contexts.push_back(e.context);
      ++plan.allocs;
    } else if (e.action == TraceAction::FreeRequested) {
      auto it = live.find(e.address);
      if (it == live.end()) {
        ++plan.unmatched_frees;
        continue;
      }
      const uint32_t slot = it->second;
      live.erase(it);
      live_bytes -= slot_bytes[slot];
      spare.push_back(slot);
      plan.ops.push_back({false, slot, 0, e.stream, i});
      plan.contexts.push_back(e.context);
      ++plan.frees;
    }
  }
  plan.slots = slot_bytes.size();
  plan.live_at_end = live.size();
  return plan;
}

ReplayResult replay(const ReplayPlan& plan, const AllocatorConfig& config, size_t capacity,
                    const ReplayOptions& options) {
  ReplayResult r;
  r.policy = config.policy;
  r.capacity = capacity;
  BoundedMemory memory(capacity, "sim:0");
  std::unique_ptr<Allocator> alloc = make_allocator(config, memory);
  if (options.record_trace) alloc->trace().enable();
  std::vector<Block> blocks(plan.slots);
  double fragmentation_sum = 0.0;
  size_t fragmentation_count = 0;
  size_t tracked_peak = 0;  // reserved after a request, at most
  size_t allocated_at_peak = 0;
  size_t end = plan.ops.size();
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    const ReplayOp& op = plan.ops[i];
    std::optional<ContextScope> scope;
    if (options.record_trace && options.contexts != nullptr) {
      scope.emplace(&options.contexts->at(plan.contexts[i]));
    }
    try {
      if (op.alloc) {
        blocks[op.slot] = alloc->allocate(op.nbytes, op.stream);
        ++r.allocs;
      } else {
        alloc->free(blocks[op.slot]);
        blocks[op.slot] = Block{};
        ++r.frees;
      }
    } catch (const OutOfMemoryError& e) {
      r.oom = true;
      r.oom_event = op.event;
      r.oom_op = i;
      r.oom_message = e.what();
      end = i;
      break;
    }
    const size_t allocated = alloc->memory_allocated();
    const size_t reserved = alloc->memory_reserved();
    if (reserved > tracked_peak) {
      tracked_peak = reserved;
      allocated_at_peak = allocated;
    } else if (reserved == tracked_peak) {
      allocated_at_peak = std::max(allocated_at_peak, allocated);
    }
    if (reserved > 0) {
      fragmentation_sum += 1.0 - static_cast<double>(allocated) / static_cast<double>(reserved);
      ++fragmentation_count;
    }
  }
  r.stats = alloc->stats();
  r.peak_allocated = static_cast<size_t>(r.stats.allocated_bytes.all().peak);
  r.peak_reserved = static_cast<size_t>(r.stats.reserved_bytes.all().peak);
  r.source_calls = r.stats.num_device_alloc + r.stats.num_device_free;
  if (tracked_peak > 0) {
    r.fragmentation_at_peak =
        1.0 - static_cast<double>(allocated_at_peak) / static_cast<double>(tracked_peak);
  }
  if (fragmentation_count > 0) {
    r.fragmentation_mean = fragmentation_sum / static_cast<double>(fragmentation_count);
  }
  if (options.record_trace) {
    r.events = alloc->trace().events();
    r.event_contexts = alloc->trace().contexts();
  }
  for (const Block& b : blocks) alloc->free(b);
  for (int pass = 0; pass < options.timed_passes; ++pass) {
    const double ns = timed_pass(plan, config, capacity, end);
    r.ns_per_op = pass == 0 ? ns : std::min(r.ns_per_op, ns);
  }
  return r;
}

}  // namespace memgrad
