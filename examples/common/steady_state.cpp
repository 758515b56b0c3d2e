// The steady-state report: the live policy's reserved bytes and caching's on a replay.
#include "examples/common/steady_state.h"

#include <algorithm>

#include <fmt/format.h>

#include "allocator/config.h"
#include "engine/memory.h"
#include "examples/common/report.h"
#include "lab/memory_plan.h"
#include "lab/policies/planned_allocator.h"
#include "lab/trace_replay.h"

namespace memgrad::examples {

SteadyStateReport::SteadyStateReport(Device device) : device_(device) {
  PolicyAllocator& alloc = allocator_for(device_);
  policy_ = std::string(alloc.policy_name());
  if (!alloc.trace().enabled()) {
    alloc.trace().enable();
    owns_trace_ = true;
  }
}

SteadyStateReport::~SteadyStateReport() {
  if (owns_trace_ && !finished_) {
    allocator_for(device_).trace().disable();
    allocator_for(device_).trace().clear();
  }
}

void SteadyStateReport::finish(int64_t steps) {
  if (finished_) return;
  finished_ = true;
  steps_ = steps;
  PolicyAllocator& alloc = allocator_for(device_);
  reserved_ = alloc.memory_reserved();
  allocated_ = alloc.memory_allocated();
  if (const auto* planned = dynamic_cast<const PlannedAllocator*>(&alloc)) {
    const PlannedCounts c = planned->planned_counts();
    const std::optional<MemoryPlan> plan = planned->plan();
    planned_note_ = fmt::format(
        "{}; {} requests from the plan in {} steps, {} before it (warm-up), {} deviated "
        "({} not in the plan's sequence, {} behind a late free, {} with every copy live, "
        "{} on another stream, {} without an arena)",
        plan ? fmt::format("arena {} ({:.3f}x the most its step has live at once) for {} planned "
                           "requests (plan: {})",
                           human_bytes(static_cast<int64_t>(plan->arena_nbytes)),
                           static_cast<double>(plan->arena_nbytes) /
                               static_cast<double>(std::max<size_t>(plan->ideal_nbytes, 1)),
                           plan->requests.size(), plan->source)
             : std::string("no plan"),
        c.planned, c.steps, c.unplanned, c.deviations(), c.mismatch, c.late_free, c.copies_busy,
        c.other_stream, c.no_arena);
  }
  const std::vector<TraceEvent> events = alloc.trace().events();
  const bool overwritten = alloc.trace().overflowed();
  if (owns_trace_) {
    alloc.trace().disable();
    alloc.trace().clear();
  }
  if (policy_ == "caching") return;
  if (overwritten) {
    replay_note_ = "the trace dropped its oldest events, so no replay";
    return;
  }
  const ReplayPlan plan = plan_replay(events);
  // Room for caching's rounding and cache; never more than the device has.
  size_t capacity = std::max<size_t>(4 * plan.ideal_peak, 256 * kMiB);
  capacity = std::min(capacity, alloc.source().capacity());
  AllocatorConfig config;  // caching with the defaults
  const ReplayResult r = replay(plan, config, capacity);
  if (r.oom) {
    replay_note_ = fmt::format("caching ran out of the replay's {} device",
                               human_bytes(static_cast<int64_t>(capacity)));
    return;
  }
  caching_reserved_ = static_cast<size_t>(r.stats.reserved_bytes.all().current);
}

void SteadyStateReport::print() const {
  if (!finished_) return;
  const auto b = [](size_t n) {
    return fmt::format("{} B ({})", with_commas(static_cast<int64_t>(n)),
                       human_bytes(static_cast<int64_t>(n)));
  };
  fmt::print("steady state after {} training step{} (before the first evaluation):\n", steps_,
             steps_ == 1 ? "" : "s");
  fmt::print("  reserved under {:<8} {}  (allocated {})\n", policy_ + ":", b(reserved_),
             b(allocated_));
  if (!planned_note_.empty()) fmt::print("  planned: {}\n", planned_note_);
  if (policy_ == "caching") return;
  if (caching_reserved_ == 0) {
    fmt::print("  reserved under caching: not measured ({})\n", replay_note_);
    return;
  }
  fmt::print("  reserved under caching: {}  (the same requests replayed on a simulated device)\n",
             b(caching_reserved_));
  fmt::print("  {} / caching: {:.3f}x\n", policy_,
             static_cast<double>(reserved_) / static_cast<double>(caching_reserved_));
}

}  // namespace memgrad::examples
