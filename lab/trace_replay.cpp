// Trace replay: plan (free matched to alloc by address), serve, measure. Reading: trace_reader.cpp.
#include "lab/trace_replay.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "allocator/bounded_memory.h"
#include "allocator/error.h"
#include "interop/error.h"
#include "lab/policy_registry.h"

namespace memgrad {
namespace {

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
  std::unique_ptr<PolicyAllocator> alloc = make_allocator(config, memory);
  std::vector<Block> blocks(plan.slots);
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < end; ++i) {
    const ReplayOp& op = plan.ops[i];
    if (op.alloc) {
      blocks[op.slot] = alloc->allocate(op.nbytes, op.stream);
    } else if (op.empty_cache) {
      alloc->empty_cache();
    } else {
      alloc->free(blocks[op.slot]);
    }
  }
  const std::chrono::duration<double, std::nano> elapsed = Clock::now() - start;
  return end == 0 ? 0.0 : elapsed.count() / static_cast<double>(end);
}

// Recreates `start` on `alloc`: each allocated block goes to the slot of the plan's allocation
// it stands for, which `seeded` marks as served. Returns why it could not ("" when it could).
std::string seed_start(const StartState& start, const ReplayPlan& plan, PolicyAllocator& alloc,
                       std::vector<Block>& blocks, std::vector<bool>& seeded) {
  std::map<size_t, size_t> op_of_event;
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    if (plan.ops[i].alloc) op_of_event.emplace(plan.ops[i].event, i);
  }
  size_t next = 0;
  for (const SeedSegment& segment : start.segments) {
    const std::optional<std::vector<Block>> made = alloc.seed(segment);
    if (!made) {
      return fmt::format("the {} policy cannot recreate a segment of {} bytes", alloc.policy_name(),
                         segment.nbytes);
    }
    for (const Block& block : *made) {
      internal_check(next < start.alloc_events.size(), "a start state with too few allocations");
      const auto it = op_of_event.find(start.alloc_events[next++]);
      internal_check(it != op_of_event.end(), "a start state's block stands for no allocation");
      blocks[plan.ops[it->second].slot] = block;
      seeded[it->second] = true;
    }
  }
  return {};
}

}  // namespace

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
      // At most 2^60 per request, so 2^64 needs 16 live at once: checked all the same.
      if (__builtin_add_overflow(live_bytes, e.requested, &live_bytes)) {
        throw TraceError(fmt::format("trace: at event {} more than 2^64 bytes are live", i),
                         fmt::format("memgrad_events[{}]", i));
      }
      plan.ideal_peak = std::max(plan.ideal_peak, live_bytes);
      plan.ops.push_back({true, false, slot, e.requested, e.stream, i});
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
      plan.ops.push_back({false, false, slot, 0, e.stream, i});
      plan.contexts.push_back(e.context);
      ++plan.frees;
    } else if (e.action == TraceAction::EmptyCache) {
      plan.ops.push_back({false, true, 0, 0, e.stream, i});
      plan.contexts.push_back(e.context);
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
  if (!options.placements.empty()) memory.follow_placements(options.placements);
  std::unique_ptr<PolicyAllocator> alloc = make_allocator(config, memory);
  std::vector<Block> blocks(plan.slots);
  std::vector<bool> seeded(plan.ops.size());
  if (options.start != nullptr) {
    r.start_refused = seed_start(*options.start, plan, *alloc, blocks, seeded);
    if (!r.start_refused.empty()) return r;
  }
  if (options.record_trace) alloc->trace().enable();
  double fragmentation_sum = 0.0;
  size_t fragmentation_count = 0;
  size_t tracked_peak = 0;  // reserved after a request, at most
  const size_t sample_every = std::max<size_t>(1, plan.ops.size() / 1000);
  double hard_sum = 0.0, soft_sum = 0.0;
  size_t sample_count = 0;
  size_t allocated_at_peak = 0;
  size_t end = plan.ops.size();
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    const ReplayOp& op = plan.ops[i];
    std::optional<ContextScope> scope;
    if (options.record_trace && options.contexts != nullptr) {
      scope.emplace(&options.contexts->at(plan.contexts[i]));
    }
    try {
      if (seeded[i]) {
        ++r.allocs;  // made with the start state
      } else if (op.alloc) {
        blocks[op.slot] = alloc->allocate(op.nbytes, op.stream);
        ++r.allocs;
      } else if (op.empty_cache) {
        alloc->empty_cache();
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
    if (reserved > tracked_peak || (reserved == tracked_peak && allocated > allocated_at_peak)) {
      tracked_peak = reserved;
      allocated_at_peak = allocated;
      r.fragmentation_report_at_peak = alloc->fragmentation();
    }
    if (reserved > 0) {
      fragmentation_sum += 1.0 - static_cast<double>(allocated) / static_cast<double>(reserved);
      ++fragmentation_count;
      if (i % sample_every == 0) {
        const FragmentationReport f = alloc->fragmentation();
        hard_sum += static_cast<double>(f.hard) / static_cast<double>(reserved);
        soft_sum += static_cast<double>(f.soft) / static_cast<double>(reserved);
        ++sample_count;
      }
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
  if (sample_count > 0) {
    r.hard_mean = hard_sum / static_cast<double>(sample_count);
    r.soft_mean = soft_sum / static_cast<double>(sample_count);
  }
  if (options.record_trace) {
    r.events = alloc->trace().events();
    r.event_contexts = alloc->trace().contexts();
  }
  if (options.inspect) options.inspect(*alloc);
  for (const Block& b : blocks) alloc->free(b);
  for (int pass = 0; pass < options.timed_passes; ++pass) {
    const double ns = timed_pass(plan, config, capacity, end);
    r.ns_per_op = pass == 0 ? ns : std::min(r.ns_per_op, ns);
  }
  return r;
}

}  // namespace memgrad
