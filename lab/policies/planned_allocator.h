// The planned policy: one arena laid out offline from a recorded step, served in O(1).
//
// A training step repeats the same requests in the same order. Given a plan of one recorded step
// (lab/memory_plan.h: every request an offset in one arena, greedy by size with
// lifetime conflicts, as TFLite's and ggml's graph allocators and llm.c's buffers are laid out),
// the i-th request of each later step gets arena + offset(i) when its size matches: no search,
// no split, no merge, and the arena is the only segment the plan needs. The plan comes from a
// file (`planned_plan:PATH`: a plan written by `lab_replay plan`, or a memgrad trace or memory
// snapshot, planned from its first step) or from the program itself (`planned_warmup_steps:N`:
// the first N steps are recorded, then the last one is planned).
//
// Deviations fall back to `caching`: a CachingAllocator over the same source, inside this policy,
// with the same options. A request falls back, and is counted by reason in planned_counts(),
// when it is on another stream than the default, when no
// planned request of its size is at or shortly after the cursor (kPlanLookahead), when a block
// the plan frees by this point is still live (a late free: its bytes may be the ones this request
// would get), when every copy of an outliving request is still live, or when the arena cannot be
// obtained. So a deviating request never overlaps a live planned block: the plan's offsets are
// only used while the live planned blocks are exactly ones the plan has live at that point.
//
// Step boundaries are found from the request sequence itself, so a program needs no marker and
// a replay behaves as the live run: after the cursor has passed the plan's last request (or no
// longer finds the sequence), a new step begins at the first request of the plan's first size
// made while no block the plan frees within a step is still live. A request of that size in the
// middle of a step keeps matching the current step first. During a warm-up (no plan yet), steps
// are delimited by the trace phase: a step begins at the first allocation in phase "forward"
// after one in another phase (memgrad's training programs run their forward in
// TracePhaseScope("forward")); a program without phases stays in the warm-up.
//
// Until a plan exists, requests (counted as `unplanned`) are served exactly: each gets a segment
// of its own size (as the passthrough policy serves it), returned to the source at its free. The
// blocks made before the plan that outlive it (parameters, optimizer state made in the first
// step, prefetched batches) so hold no more than their own bytes, where a cache would keep whole
// segments around each of them for the rest of the run (caching gives a 1.6 MB parameter a
// 20 MiB segment). Requests on other streams, and those of a program that makes 65,536 requests
// before its first step (no phases), go to the caching fallback instead, as do the requests that
// deviate from the plan.
//
// Statistics: the arena is one segment (obtained at the first planned request, returned by
// empty_cache() and before an OutOfMemoryError when no planned block lives in it); its free
// stretches count as inactive_split while a planned block lives in it. The fallback and the
// warm-up's exact policy are parts of this one (PolicyAllocator::adopt): their segments and
// blocks count in this policy's stats, their events go to its trace, and they reserve within
// its memory fraction, beside the arena.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "allocator/caching_allocator.h"
#include "allocator/config.h"
#include "allocator/passthrough_allocator.h"
#include "allocator/policy_allocator.h"
#include "lab/memory_plan.h"

namespace memgrad {

// Why requests fell back to the caching fallback, and how many were served from the plan.
struct PlannedCounts {
  int64_t planned = 0;       // requests served from the arena
  int64_t unplanned = 0;     // served before a plan existed (warm-up, or none)
  int64_t mismatch = 0;      // no planned request of this size at or shortly after the cursor
  int64_t late_free = 0;     // a block the plan frees by this point was still live
  int64_t copies_busy = 0;   // every copy of an outliving request was still live
  int64_t other_stream = 0;  // on another stream than the default
  int64_t no_arena = 0;      // the arena could not be obtained (source full)
  int64_t steps = 0;         // steps begun on the plan
  int64_t skipped = 0;       // planned requests a step passed over without making them

  // The requests that deviated from a plan (every fallback but `unplanned`).
  int64_t deviations() const {
    return mismatch + late_free + copies_busy + other_stream + no_arena;
  }
};

class PlannedAllocator final : public PolicyAllocator {
 public:
  // A planned policy over `source` that records its plan live (planned_warmup_steps steps, or
  // kDefaultPlannedWarmupSteps). The fallback gets `config`'s caching options and memory
  // fraction. Throws ConfigError for a bad configuration, and for planned_plan: a plan file is
  // read by make_allocator (lab/policy_registry.h), which passes the plan to the next one.
  PlannedAllocator(MemorySource& source, const AllocatorConfig& config = {});
  // A planned policy serving `plan` (checked: PlanError when it is not safe to serve).
  PlannedAllocator(MemorySource& source, MemoryPlan plan, const AllocatorConfig& config = {});

  std::string_view policy_name() const override { return "planned"; }

  // How requests were served so far. Allocates: nothing.
  PlannedCounts planned_counts() const;
  // The plan in use (none during a warm-up). Allocates: a copy of the plan.
  std::optional<MemoryPlan> plan() const;
  // The fallback, for its options (the randomized test reads its rounding).
  const CachingAllocator& fallback() const { return *fallback_; }
  // Whether `address` (relative to the source's base, as in snapshots) is the arena's start, or
  // a segment of its own served before the plan.
  bool is_arena(uint64_t address) const;
  bool is_exact(uint64_t address) const;

 protected:
  // Allocates: the planned block (the request rounded to 512 bytes, at its offset in the arena;
  // the arena itself at the first planned request), a segment of its own before the plan, or
  // what the caching fallback allocates. The retry (after the arena was released) goes to the
  // fallback.
  Placement place(const Request& request) override;
  // A planned block's slot is free again; the others go back to the policy that placed them.
  SplitTally take_back(const Block& block) override;
  // The fallback's cache, then the arena when no planned block lives in it; whether the arena
  // went (the fallback released its own before refusing).
  bool release_cached() override;
  // The arena (its live planned blocks and the free stretches between them) and the fallback's
  // and exact policy's segments.
  void describe(std::vector<SegmentSnapshot>& out) const override;
  // The fallback's blocks wait as the fallback's rule says; planned blocks never wait (the plan
  // serves the default stream only, and, like every lab policy, keeps no stream events).
  bool defer_free(const Block& block) override;
  void note_stream_use(const Block& block, StreamId stream) override;
  // The fallback's segment size: the arena is obtained once, and a request the plan does not
  // serve goes to the fallback (or, before the plan, to a segment of its own size, no larger).
  size_t source_bytes_for(size_t nbytes) const override {
    return caching_segment_size(fallback_->round_size(nbytes));
  }

 private:
  // What both constructors do: the fallback and exact policies, then the plan (already checked)
  // or, without one, the warm-up.
  PlannedAllocator(MemorySource& source, const AllocatorConfig& config,
                   std::optional<MemoryPlan> plan);

  // A region of the arena: one per request freed within the step, one per copy otherwise.
  struct Slot {
    size_t offset = 0;
    uint32_t request = 0;
    uint32_t start_edge = 0;  // index of `offset` in edges_
    uint32_t end_edge = 0;    // index of offset + nbytes in edges_
    bool live = false;
    bool due = false;      // live past the point where the plan frees it
    size_t requested = 0;  // the caller's bytes while live
  };
  // A planned request, flattened for the hot path.
  struct Entry {
    size_t nbytes = 0;
    uint32_t free_before = PlannedRequest::kOutlives;
    uint32_t first_slot = 0;
    uint32_t copies = 1;
    uint32_t next_steady = 0;  // the next request after this one that is not one_time
    bool one_time = false;
  };
  enum class Reason { Unplanned, Mismatch, LateFree, CopiesBusy, OtherStream, NoArena };

  void install_plan(MemoryPlan plan);
  std::optional<uint32_t> match(size_t nbytes);
  uint32_t next_index(uint32_t k) const;
  void begin_step();
  void advance_to(uint32_t k);
  Slot* free_slot_of(uint32_t k);
  bool ensure_arena();
  Placement serve(Slot& slot, size_t nbytes);
  bool release_arena();
  SplitTally arena_tally() const;
  Placement fall_back(const Request& request, Reason reason);
  Placement serve_exactly(const Request& request);
  void record_warmup_alloc(const Placement& placed, const Request& request);
  void record_warmup_free(const Block& block);
  void finish_warmup();
  bool in_arena(const void* ptr) const {
    return arena_ != nullptr && ptr >= arena_ && ptr < arena_ + arena_nbytes_;
  }

  std::unique_ptr<CachingAllocator> fallback_;   // a part of this policy (adopted)
  std::unique_ptr<PassthroughAllocator> exact_;  // the warm-up steps' requests (adopted)
  std::unordered_set<const void*> exact_live_;   // blocks of exact_ not yet freed

  // The plan, flattened (empty until one is installed).
  std::optional<MemoryPlan> plan_;
  std::vector<Entry> entries_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> due_start_;       // due_items_[due_start_[p] .. due_start_[p + 1]): the
  std::vector<uint32_t> due_items_;       // slots of requests freed before allocation p
  std::vector<uint8_t> edge_start_live_;  // a live slot starts at this edge
  std::vector<uint8_t> edge_end_live_;    // a live slot ends at this edge
  uint32_t first_steady_ = 0;             // the first request that is not one_time

  // Where the current step is. A step is "in" from its first planned request until the cursor
  // passes the last one.
  bool in_step_ = false;
  int64_t epoch_ = -1;           // steps begun, minus one (0: the first, one_time requests served)
  uint32_t cursor_ = 0;          // the next request index expected
  uint32_t due_done_ = 0;        // due lists of positions up to this one are processed
  int64_t overdue_ = 0;          // live step-local slots past their planned free
  int64_t live_step_local_ = 0;  // live slots of requests freed within the step
  int64_t live_planned_ = 0;     // live slots
  int64_t free_runs_ = 1;        // maximal free stretches of the arena

  // The arena (null until the first planned request, and after it is returned).
  char* arena_ = nullptr;
  size_t arena_nbytes_ = 0;
  StatPool arena_pool_ = StatPool::LargePool;
  size_t arena_live_bytes_ = 0;

  // The warm-up: steps are recorded from the first "forward" phase until warmup_steps_ are done.
  size_t warmup_steps_ = 0;
  bool warmup_started_ = false;
  bool previous_forward_ = false;
  bool warmup_abandoned_ = false;
  size_t exact_before_step_ = 0;  // requests before the first step (exact within a budget)
  size_t warmup_events_ = 0;
  uint64_t next_id_ = 0;
  std::vector<RecordedStep> warmup_;
  std::unordered_map<const void*, uint64_t> warmup_ids_;  // live recorded block -> id

  PlannedCounts counts_;
};

}  // namespace memgrad
