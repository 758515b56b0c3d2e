// Trace replay: the alloc/free sequence of a recorded trace, served again by any policy.
//
// A trace written by TraceRecorder::to_json (or by MEMGRAD_TRACE at exit) holds every alloc and
// free of one device with its requested bytes. plan_replay() turns those events into a sequence
// of requests, matching each free to its alloc by address; replay() serves that sequence with a
// fresh allocator of any policy over a fresh BoundedMemory of a chosen capacity and measures what
// the policy made of it: peak reserved and allocated bytes, fragmentation, source calls, the
// first OutOfMemoryError (with the trace event it happened at), and the time per request. The
// requests are the program's, not the recording policy's blocks, so policies are compared on
// exactly the same work. Frees of blocks allocated before the trace began are skipped; OOM
// events and snapshot markers of the recording are not requests and are skipped too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/config.h"
#include "allocator/fragmentation.h"
#include "allocator/policy_allocator.h"
#include "allocator/stats.h"
#include "allocator/trace.h"
#include "interop/snapshot_import.h"
#include "interop/trace_reader.h"

namespace memgrad {

// One request: allocate `nbytes` into `slot`, free the block in `slot`, or (empty_cache) call
// empty_cache().
struct ReplayOp {
  bool alloc = true;
  bool empty_cache = false;
  uint32_t slot = 0;
  size_t nbytes = 0;  // the caller's bytes (alloc only)
  StreamId stream = kDefaultStream;
  size_t event = 0;  // index of the trace event it comes from
};

// The request sequence of a trace and what it needs at least.
struct ReplayPlan {
  std::vector<ReplayOp> ops;
  std::vector<uint32_t> contexts;  // per op: the context index of its trace event
  size_t slots = 0;                // blocks alive at once, at most
  size_t allocs = 0;
  size_t frees = 0;
  size_t unmatched_frees = 0;  // frees of blocks allocated before the trace began
  size_t live_at_end = 0;      // blocks never freed within the trace
  size_t ideal_peak = 0;       // max over time of the live requested bytes
};

// The requests of `events`, in order. Allocates: host memory for the plan only.
ReplayPlan plan_replay(const std::vector<TraceEvent>& events);

// What one policy made of a plan.
struct ReplayResult {
  std::string policy;
  size_t capacity = 0;
  size_t allocs = 0;  // requests served before the end or the first OOM
  size_t frees = 0;
  size_t peak_reserved = 0;   // bytes
  size_t peak_allocated = 0;  // bytes
  // 1 - allocated/reserved at the peak of reserved (the highest allocated while reserved is at
  // its peak), and averaged over the requests (those with reserved > 0).
  double fragmentation_at_peak = 0.0;
  double fragmentation_mean = 0.0;
  // Where reserved - allocated was at that peak (hard, soft, stream: allocator/fragmentation.h),
  // and the hard and soft shares of reserved averaged over about 1000 evenly spaced requests.
  FragmentationReport fragmentation_report_at_peak;
  double hard_mean = 0.0;
  double soft_mean = 0.0;
  std::string start_refused;  // why ReplayOptions::start could not be recreated ("": it was)
  int64_t source_calls = 0;   // num_device_alloc + num_device_free (page maps for expandable)
  bool oom = false;
  size_t oom_event = 0;  // trace event index of the request that failed
  size_t oom_op = 0;     // its index in the plan
  std::string oom_message;
  double ns_per_op = 0.0;          // allocate or free, best of the timed passes (0: not timed)
  MemoryStats stats;               // at the end of the serving pass, before the live blocks go
  std::vector<TraceEvent> events;  // the policy's own trace, when asked for ...
  std::vector<TraceContextRecord> event_contexts;  // ... and the contexts its events index
};

struct ReplayOptions {
  int timed_passes = 0;       // extra passes, each on a fresh device, timed without stats reads
  bool record_trace = false;  // fill ReplayResult::events (contexts: those of `contexts`)
  const std::vector<TraceContextRecord>* contexts = nullptr;  // the recording's, for the trace
  // The segments and blocks to recreate before the first request (PolicyAllocator::seed), with
  // the plan's allocations they stand for, which are then not served again: a recorded history
  // replayed from the state it started in. The trace (record_trace) starts after them. A policy
  // that cannot seed is refused: ReplayResult::start_refused says so and nothing is served.
  const StartState* start = nullptr;
  // Where the simulated device places its first segments (offset, bytes), in order: a recorded
  // layout followed (BoundedMemory::follow_placements); empty: first fit.
  std::vector<std::pair<size_t, size_t>> placements = {};
  // Called with the allocator at the end of the serving pass, before its live blocks are freed
  // (to read what a policy counts beyond the stats, e.g. the planned policy's fallbacks).
  std::function<void(const PolicyAllocator&)> inspect = nullptr;
};

// Serves `plan` with a fresh allocator of `config.policy` over a fresh BoundedMemory of
// `capacity` bytes, stopping at the first OutOfMemoryError (caught and reported). Allocates: the
// simulated device (address space only, pages as the policy maps them). Throws ConfigError for a
// bad config.
ReplayResult replay(const ReplayPlan& plan, const AllocatorConfig& config, size_t capacity,
                    const ReplayOptions& options = {});

}  // namespace memgrad
