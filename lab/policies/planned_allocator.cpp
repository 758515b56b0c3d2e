// PlannedAllocator: the plan's cursor, the arena's slots, and the caching fallback beside them.
//
// Why a planned request never overlaps a live block. The plan gives two requests overlapping
// bytes only when their lifetimes are disjoint: i < j share bytes only if i is freed before j is
// allocated (free_before(i) <= j), and an outliving request's copies share bytes with nothing.
// Within a step the cursor only moves forward, so each request index is served at most once per
// step, and before request k is served every request the plan frees before k is marked due;
// overdue_ counts the due ones still live. So when k is served with overdue_ == 0, every live
// step-local slot belongs to a request j < k of this step with free_before(j) > k: one whose
// bytes the plan keeps apart from k's. A step begins only when no step-local slot is live, so no
// earlier step's step-local block is live either; earlier steps' outliving copies are live only
// in their own bytes, and the copy k takes is one that is free. Fallback blocks are never in the
// arena.
#include "lab/policies/planned_allocator.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "allocator/error.h"
#include "lab/memory_plan.h"

namespace memgrad {
namespace {

// Warm-up events recorded at most: a program whose steps never end (no "forward" phase after
// the first) stops recording there and stays on the fallback.
constexpr size_t kMaxWarmupEvents = size_t{1} << 20;
// Requests served exactly before the first step begins, at most: a program that makes more
// without a "forward" phase (one that marks no phases) gets the caching fallback from then on.
constexpr size_t kMaxExactBeforeStep = size_t{1} << 16;

AllocatorConfig fallback_config(const AllocatorConfig& config) {
  AllocatorConfig c = config;
  c.policy = "caching";
  c.planned_plan.clear();
  c.planned_warmup_steps = 0;
  return c;
}

MemoryPlan checked(MemoryPlan plan) {
  check_plan(plan, plan.source);
  return plan;
}

}  // namespace

PlannedAllocator::PlannedAllocator(MemorySource& source, const AllocatorConfig& config)
    : PlannedAllocator(source, config, std::nullopt) {
  if (!config.planned_plan.empty()) {
    throw ConfigError(fmt::format("policy:planned: planned_plan '{}' is read by make_allocator "
                                  "(lab/policy_registry.h); give this constructor the plan",
                                  config.planned_plan),
                      "planned_plan", config.planned_plan);
  }
}

PlannedAllocator::PlannedAllocator(MemorySource& source, MemoryPlan plan,
                                   const AllocatorConfig& config)
    : PlannedAllocator(source, config, checked(std::move(plan))) {}

PlannedAllocator::PlannedAllocator(MemorySource& source, const AllocatorConfig& config,
                                   std::optional<MemoryPlan> plan)
    : PolicyAllocator(source, config.memory_fraction),
      fallback_(std::make_unique<CachingAllocator>(source, fallback_config(config))),
      exact_(std::make_unique<PassthroughAllocator>(source)) {
  adopt(*fallback_);
  adopt(*exact_);
  set_max_split_size(fallback_->config().max_split_size);
  if (plan) {
    install_plan(std::move(*plan));
  } else {
    warmup_steps_ =
        config.planned_warmup_steps != 0 ? config.planned_warmup_steps : kDefaultPlannedWarmupSteps;
  }
}

// ---- the plan, flattened ----

void PlannedAllocator::install_plan(MemoryPlan plan) {
  const auto n = static_cast<uint32_t>(plan.requests.size());
  entries_.assign(n, Entry{});
  slots_.clear();
  std::vector<size_t> edges;
  for (uint32_t k = 0; k < n; ++k) {
    const PlannedRequest& r = plan.requests[k];
    Entry& e = entries_[k];
    e.nbytes = r.nbytes;
    e.free_before = r.free_before;
    e.one_time = r.one_time;
    e.first_slot = static_cast<uint32_t>(slots_.size());
    e.copies = static_cast<uint32_t>(r.offsets.size());
    for (size_t offset : r.offsets) {
      slots_.push_back(Slot{offset, k});
      edges.push_back(offset);
      edges.push_back(offset + r.nbytes);
    }
  }
  uint32_t next = n;
  for (uint32_t k = n; k-- > 0;) {
    entries_[k].next_steady = next;
    if (!entries_[k].one_time) next = k;
  }
  first_steady_ = next;
  // Slots of requests freed within the step, listed at the allocation before which they go.
  due_start_.assign(n + 2, 0);
  for (const Entry& e : entries_) {
    if (e.free_before != PlannedRequest::kOutlives) ++due_start_[e.free_before + 1];
  }
  for (uint32_t p = 0; p <= n; ++p) due_start_[p + 1] += due_start_[p];
  due_items_.assign(due_start_[n + 1], 0);
  std::vector<uint32_t> fill(due_start_.begin(), due_start_.end() - 1);
  for (const Entry& e : entries_) {
    if (e.free_before != PlannedRequest::kOutlives) {
      due_items_[fill[e.free_before]++] = e.first_slot;
    }
  }
  // Block edges, so that a slot's neighbours are found in O(1) for the free-stretch count.
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  const auto edge_of = [&](size_t at) {
    return static_cast<uint32_t>(std::lower_bound(edges.begin(), edges.end(), at) - edges.begin());
  };
  for (Slot& s : slots_) {
    s.start_edge = edge_of(s.offset);
    s.end_edge = edge_of(s.offset + entries_[s.request].nbytes);
  }
  edge_start_live_.assign(edges.size(), 0);
  edge_end_live_.assign(edges.size(), 0);
  arena_nbytes_ = plan.arena_nbytes;
  arena_pool_ = pool_of_segment(arena_nbytes_);
  plan_ = std::move(plan);
}

uint32_t PlannedAllocator::next_index(uint32_t k) const {
  return epoch_ > 0 ? entries_[k].next_steady : k + 1;
}

// ---- the cursor ----

// The request index `nbytes` (rounded) takes, beginning a step when it is one's first request:
// the one at the cursor; else a new step's first; else the next of that size within the window.
std::optional<uint32_t> PlannedAllocator::match(size_t nbytes) {
  const auto n = static_cast<uint32_t>(entries_.size());
  const auto take = [&](uint32_t k, int64_t skipped) {
    counts_.skipped += skipped;
    advance_to(k);
    cursor_ = next_index(k);
    in_step_ = cursor_ < n;
    return k;
  };
  if (in_step_ && entries_[cursor_].nbytes == nbytes) return take(cursor_, 0);
  const uint32_t first = epoch_ >= 0 ? first_steady_ : 0;  // of the step that would begin
  if (first < n && live_step_local_ == 0 && entries_[first].nbytes == nbytes) {
    begin_step();
    cursor_ = first;
    return take(first, 0);
  }
  if (!in_step_) return std::nullopt;
  uint32_t k = next_index(cursor_);
  for (int64_t seen = 1; k < n && seen < kPlanLookahead; k = next_index(k), ++seen) {
    if (entries_[k].nbytes == nbytes) return take(k, seen);
  }
  return std::nullopt;
}

void PlannedAllocator::begin_step() {
  ++epoch_;
  ++counts_.steps;
  in_step_ = true;
  due_done_ = 0;
  overdue_ = 0;  // nothing step-local is live when a step begins
}

// Marks the slots the plan frees before any allocation up to `k` as due; live ones are overdue.
void PlannedAllocator::advance_to(uint32_t k) {
  for (; due_done_ <= k; ++due_done_) {
    for (uint32_t i = due_start_[due_done_]; i < due_start_[due_done_ + 1]; ++i) {
      Slot& s = slots_[due_items_[i]];
      if (s.live && !s.due) {
        s.due = true;
        ++overdue_;
      }
    }
  }
}

PlannedAllocator::Slot* PlannedAllocator::free_slot_of(uint32_t k) {
  const Entry& e = entries_[k];
  for (uint32_t c = 0; c < e.copies; ++c) {
    Slot& s = slots_[e.first_slot + c];
    if (!s.live) return &s;
  }
  return nullptr;
}

// ---- allocate and free ----

Placement PlannedAllocator::place(const Request& request) {
  // The one retry, after the arena went back: the fallback again (only it refuses).
  if (request.retry) return place_in(*fallback_, request);
  const StreamId stream = request.stream;
  if (!plan_) {
    if (warmup_steps_ > 0 && !warmup_abandoned_ && stream == kDefaultStream) {
      const char* phase = current_trace_context().phase;
      const bool forward = phase != nullptr && std::strcmp(phase, "forward") == 0;
      const bool begins = forward && !previous_forward_;
      previous_forward_ = forward;
      if (begins && warmup_.size() == warmup_steps_) {
        finish_warmup();  // this request is the first of the first planned step
      } else if (begins) {
        warmup_.emplace_back();
      }
    }
    if (!plan_) {
      // Exact segments until the plan: in the warm-up's steps, and before the first one within
      // a budget.
      const bool before_step = warmup_.empty();
      const bool exact = warmup_steps_ > 0 && !warmup_abandoned_ && stream == kDefaultStream &&
                         (!before_step || ++exact_before_step_ <= kMaxExactBeforeStep);
      const Placement placed =
          exact ? serve_exactly(request) : fall_back(request, Reason::Unplanned);
      record_warmup_alloc(placed, request);
      return placed;
    }
  }
  if (stream != kDefaultStream) return fall_back(request, Reason::OtherStream);
  const std::optional<uint32_t> k = match(round_up(request.nbytes, kMinBlockSize));
  if (!k) return fall_back(request, Reason::Mismatch);
  if (overdue_ > 0) return fall_back(request, Reason::LateFree);
  Slot* slot = free_slot_of(*k);
  if (slot == nullptr) return fall_back(request, Reason::CopiesBusy);
  if (!ensure_arena()) return fall_back(request, Reason::NoArena);
  return serve(*slot, request.nbytes);
}

bool PlannedAllocator::ensure_arena() {
  if (arena_ != nullptr) return true;
  void* ptr = obtain_segment(arena_pool_, arena_nbytes_);
  if (ptr == nullptr) {
    // Room held by the fallback's cache is the arena's first: release it and try once more.
    const int64_t released = counted().num_device_free;
    release_cached_in(*fallback_);
    if (counted().num_device_free == released) return false;
    count_retry();
    ptr = obtain_segment(arena_pool_, arena_nbytes_);
    if (ptr == nullptr) return false;
  }
  arena_ = static_cast<char*>(ptr);
  return true;
}

// A free stretch ends next to [start, end) on the left when the arena has bytes there that no
// live slot ends at, likewise on the right: the count of free stretches follows from the two.
Placement PlannedAllocator::serve(Slot& slot, size_t nbytes) {
  const Entry& e = entries_[slot.request];
  const SplitTally before = arena_tally();
  const bool left_free = slot.offset > 0 && edge_end_live_[slot.start_edge] == 0;
  const bool right_free =
      slot.offset + e.nbytes < arena_nbytes_ && edge_start_live_[slot.end_edge] == 0;
  free_runs_ += static_cast<int64_t>(left_free) + static_cast<int64_t>(right_free) - 1;
  edge_start_live_[slot.start_edge] = 1;
  edge_end_live_[slot.end_edge] = 1;
  slot.live = true;
  slot.due = false;
  slot.requested = nbytes;
  ++live_planned_;
  if (e.free_before != PlannedRequest::kOutlives) ++live_step_local_;
  arena_live_bytes_ += e.nbytes;
  ++counts_.planned;
  return Placement{arena_ + slot.offset, e.nbytes, arena_pool_, &slot, arena_tally() - before};
}

bool PlannedAllocator::defer_free(const Block& block) {
  if (in_arena(block.ptr) || exact_live_.count(block.ptr) > 0) return false;
  return defer_free_in(*fallback_, block);
}

SplitTally PlannedAllocator::take_back(const Block& block) {
  if (!in_arena(block.ptr)) {
    record_warmup_free(block);
    if (exact_live_.erase(block.ptr) > 0) return take_back_in(*exact_, block);
    return take_back_in(*fallback_, block);
  }
  auto* slot = static_cast<Slot*>(block.record);
  internal_check(slot != nullptr && slot->live && arena_ + slot->offset == block.ptr,
                 "planned: free of a block that is not live (double free?)");
  const Entry& e = entries_[slot->request];
  const SplitTally before = arena_tally();
  slot->live = false;
  if (slot->due) --overdue_;
  slot->due = false;
  slot->requested = 0;
  --live_planned_;
  if (e.free_before != PlannedRequest::kOutlives) --live_step_local_;
  arena_live_bytes_ -= e.nbytes;
  edge_start_live_[slot->start_edge] = 0;
  edge_end_live_[slot->end_edge] = 0;
  const bool left_free = slot->offset > 0 && edge_end_live_[slot->start_edge] == 0;
  const bool right_free =
      slot->offset + e.nbytes < arena_nbytes_ && edge_start_live_[slot->end_edge] == 0;
  free_runs_ += 1 - static_cast<int64_t>(left_free) - static_cast<int64_t>(right_free);
  return arena_tally() - before;
}

void PlannedAllocator::note_stream_use(const Block& block, StreamId stream) {
  if (!in_arena(block.ptr) && exact_live_.count(block.ptr) == 0) {
    note_stream_use_in(*fallback_, block, stream);
  }
}

SplitTally PlannedAllocator::arena_tally() const {
  if (live_planned_ == 0) return {};
  return {free_runs_, static_cast<int64_t>(arena_nbytes_ - arena_live_bytes_)};
}

bool PlannedAllocator::release_arena() {
  if (arena_ == nullptr || live_planned_ > 0) return false;
  return_segment(arena_pool_, arena_, arena_nbytes_);
  arena_ = nullptr;
  return true;
}

bool PlannedAllocator::release_cached() {
  release_cached_in(*fallback_);
  return release_arena();
}

// ---- the fallback ----

Placement PlannedAllocator::fall_back(const Request& request, Reason reason) {
  switch (reason) {
    case Reason::Unplanned: ++counts_.unplanned; break;
    case Reason::Mismatch: ++counts_.mismatch; break;
    case Reason::LateFree: ++counts_.late_free; break;
    case Reason::CopiesBusy: ++counts_.copies_busy; break;
    case Reason::OtherStream: ++counts_.other_stream; break;
    case Reason::NoArena: ++counts_.no_arena; break;
  }
  // A refusal leaves the fallback's cache released; the frame then releases the arena too (when
  // no planned block lives in it) and retries.
  return place_in(*fallback_, request);
}

// A warm-up step's request, in a segment of its own (the fallback serves it when the fraction or
// the source has no room for one: the fallback's cache may).
Placement PlannedAllocator::serve_exactly(const Request& request) {
  if (!within_fraction(round_up(request.nbytes, kMinBlockSize))) {
    return fall_back(request, Reason::Unplanned);
  }
  const Placement placed = place_in(*exact_, request);
  if (placed.ptr == nullptr) return fall_back(request, Reason::Unplanned);
  exact_live_.insert(placed.ptr);
  ++counts_.unplanned;
  return placed;
}

// ---- the warm-up ----

void PlannedAllocator::record_warmup_alloc(const Placement& placed, const Request& request) {
  if (warmup_.empty() || plan_ || placed.ptr == nullptr || request.stream != kDefaultStream) {
    return;
  }
  if (++warmup_events_ > kMaxWarmupEvents) {
    warmup_abandoned_ = true;
    warmup_.clear();
    warmup_ids_.clear();
    return;
  }
  const TraceContext& c = current_trace_context();
  warmup_.back().push_back({true, next_id_, request.nbytes, context_tag(c.phase, c.op)});
  warmup_ids_[placed.ptr] = next_id_++;
}

void PlannedAllocator::record_warmup_free(const Block& block) {
  if (warmup_.empty() || plan_) return;
  auto it = warmup_ids_.find(block.ptr);
  if (it == warmup_ids_.end()) return;
  warmup_.back().push_back({false, it->second, 0});
  warmup_ids_.erase(it);
  ++warmup_events_;
}

// Plans the last recorded step (the others are its dry run) and returns what the warm-up cached.
void PlannedAllocator::finish_warmup() {
  MemoryPlan plan = plan_recording(warmup_, warmup_.size() - 1);
  plan.source = "warm-up";
  install_plan(std::move(plan));
  warmup_.clear();
  warmup_ids_.clear();
  release_cached_in(*fallback_);
}

// ---- what it shows ----

void PlannedAllocator::describe(std::vector<SegmentSnapshot>& out) const {
  describe_in(*fallback_, out);
  describe_in(*exact_, out);
  if (arena_ == nullptr) return;
  SegmentSnapshot arena = segment_at(arena_, arena_nbytes_, arena_pool_);
  std::vector<const Slot*> live;
  for (const Slot& s : slots_) {
    if (s.live) live.push_back(&s);
  }
  std::sort(live.begin(), live.end(),
            [](const Slot* a, const Slot* b) { return a->offset < b->offset; });
  size_t at = 0;
  for (const Slot* s : live) {
    if (s->offset > at) {
      arena.blocks.push_back({arena.address + at, s->offset - at, 0, false, false});
    }
    const size_t nbytes = entries_[s->request].nbytes;
    arena.blocks.push_back({arena.address + s->offset, nbytes, s->requested, true, false});
    at = s->offset + nbytes;
  }
  if (at < arena_nbytes_) {
    arena.blocks.push_back({arena.address + at, arena_nbytes_ - at, 0, false, false});
  }
  out.push_back(std::move(arena));
}

PlannedCounts PlannedAllocator::planned_counts() const {
  const auto guard = lock();
  return counts_;
}

std::optional<MemoryPlan> PlannedAllocator::plan() const {
  const auto guard = lock();
  return plan_;
}

bool PlannedAllocator::is_exact(uint64_t address) const {
  const auto guard = lock();
  const auto* ptr = reinterpret_cast<const void*>(source_.address_base() + address);
  return exact_live_.count(ptr) > 0;
}

bool PlannedAllocator::is_arena(uint64_t address) const {
  const auto guard = lock();
  return arena_ != nullptr && address == trace_address(arena_);
}

}  // namespace memgrad
