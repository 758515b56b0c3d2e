// A memory plan: one recorded training step, every request given an offset in one arena.
//
// A step is the requests of one iteration of a loop (forward, backward, optimizer, zero_grad,
// the next batch). Recorded once (from a trace, or live during a warm-up), each request has a
// lifetime in allocation-index time: request i is live from its allocation until the
// allocation of request free_before(i), or, when the step does not free it, for the whole step
// (its block outlives the step: optimizer state, the next batch). plan_recording() places the
// requests in one arena with TFLite's "greedy by size": largest first, each at the smallest gap
// left by already placed requests whose lifetimes intersect its own (or above them all). Two
// requests share bytes only when their lifetimes are disjoint, so a step that repeats the
// recorded sequence can be served by handing request i its offset, with no search at all
// (lab/policies/planned_allocator.h does that).
//
// The bound. No placement fits in less than the ideal: the most bytes live at once under these
// lifetimes (ideal_nbytes). Greedy by size carries no constant-factor guarantee (placing
// intervals is the NP-hard "dynamic storage allocation" problem; the best known polynomial
// algorithms guarantee (2 + e) x the ideal, Buchsbaum et al. 2003). What it does here is
// measured: arena_nbytes / ideal_nbytes is printed by `lab_replay plan` and docs/allocator-lab.md
// lists it for the shipped traces (within 0.1% of the ideal on each of their steps).
//
// Memory: plans live in host memory; nothing here touches a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "interop/trace_reader.h"

namespace memgrad {

// A memory plan (policy:planned) that cannot be read or used: malformed JSON, a missing or
// out-of-range field, or offsets that would hand out overlapping blocks. `path` names the file
// (empty for a plan built in memory) and `field` the offending field ("requests[3].offsets").
class PlanError : public Error {
 public:
  PlanError(std::string message, std::string path = {}, std::string field = {})
      : Error(std::move(message)), path(std::move(path)), field(std::move(field)) {}
  // "plan 'PATH': FIELD: WHY" (no path part for a plan built in memory).
  static PlanError at(const std::string& path, const std::string& field, const std::string& why);
  std::string path;
  std::string field;
};

struct RecordedTrace;

// The request of a step that a plan gives an offset, in allocation order.
struct PlannedRequest {
  // Not freed within the step: its block lives across the step boundary.
  static constexpr uint32_t kOutlives = std::numeric_limits<uint32_t>::max();

  size_t nbytes = 0;                 // bytes: the request rounded up to 512 (its block's size)
  uint32_t free_before = kOutlives;  // freed before the allocation of this request index, in
                                     // (index, count]; count: after the step's last allocation
  // Outliving and absent from every later step of the recording (state a first step creates
  // once, like Adam's moments): served in the first step only, skipped after it.
  bool one_time = false;
  // Bytes from the arena's start, multiples of 512: one per copy. A request freed within the step
  // has one; an outliving request has one per instance the recording held live at once (a data
  // loader's prefetched batches), each reserved for the whole step.
  std::vector<size_t> offsets;

  bool outlives() const { return free_before == kOutlives; }
};

// Offsets for every request of one step, and what they cost.
struct MemoryPlan {
  std::vector<PlannedRequest> requests;
  size_t arena_nbytes = 0;  // bytes: the arena the offsets index (max offset + nbytes)
  size_t ideal_nbytes = 0;  // bytes: most live at once under the plan's lifetimes (a lower bound)
  uint32_t steps_recorded = 0;  // steps in the recording it was made from
  uint32_t planned_step = 0;    // which of them it plans (0-based)
  std::string source;           // what it was made from: a trace's path, "warm-up", ...
};

// One event of a recorded step: an allocation of `nbytes` (the caller's bytes) named `id`, or
// the free of `id`. Ids are unique over a recording; a free whose id was not allocated earlier
// in the recording (a block from before it) is ignored. `tag` names where the allocation was made
// (context_tag() of its phase and op; 0 when unknown): the dry run aligns steps on size and tag,
// so that a later step's request is not taken for a first-step one of the same size. The label
// is left out: programs label their steps ("step 3"), which would make every step differ.
struct StepEvent {
  bool alloc = true;
  uint64_t id = 0;
  size_t nbytes = 0;
  uint64_t tag = 0;
};

// A hash (FNV-1a) of a trace context's phase and op. Allocates: nothing.
uint64_t context_tag(std::string_view phase, std::string_view op);
using RecordedStep = std::vector<StepEvent>;

// How far past a mismatch the sequence is searched for the next request of the same size
// (planned requests skipped on the way are simply not served). Bounds the cost of a deviating
// request; the dry run of plan_recording() and the planned policy use the same window.
inline constexpr uint32_t kPlanLookahead = 64;
// The largest alignment table (plan requests x step allocations) the dry run builds.
inline constexpr size_t kMaxAlignCells = size_t{1} << 24;
// The most copies an outliving request gets (instances live at once beyond it fall back).
inline constexpr uint32_t kMaxPlanCopies = 8;

// Plans step `plan_step` of `steps`: lifetimes from that step; one_time flags from the later
// steps aligned to it (the longest common subsequence of (size, tag) keys, or, for steps of more
// than kMaxAlignCells pairs, the matching below); copies from a dry run of every step matched
// against it as the planned policy serves them (by size, within kPlanLookahead); offsets by
// greedy by size. Allocates: host memory for the plan (O(requests)) and the alignment table (at
// most kMaxAlignCells x 2 bytes); takes O(items^2) time in the worst case (items = requests +
// extra copies). Throws PlanError when `plan_step` is out of range or the step has no allocation.
MemoryPlan plan_recording(const std::vector<RecordedStep>& steps, size_t plan_step);

// The steps of a memgrad trace: a step begins at the first allocation in phase "forward" that
// follows an allocation in another phase; what comes before the first one is not a step. A
// trace without a forward phase is one step. Frees are matched to allocations by address.
// Allocates: host memory for the events.
std::vector<RecordedStep> steps_of_trace(const RecordedTrace& trace);

// The plan of a trace's first step, the rest of the trace as its dry run. Throws PlanError for a
// trace without an allocation.
MemoryPlan plan_trace(const RecordedTrace& trace, std::string source);

// Checks that `plan` can be served safely: sizes and offsets positive multiples of 512 inside
// the arena, free_before in range, one copy per request freed within the step, at most
// kMaxPlanCopies otherwise, and no two requests whose lifetimes intersect overlapping in bytes.
// Throws PlanError naming the field (and `path`). O(n log n).
void check_plan(const MemoryPlan& plan, const std::string& path = {});

}  // namespace memgrad
