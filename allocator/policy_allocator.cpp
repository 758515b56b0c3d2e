// PolicyAllocator: the request guard, the lock, the place-release-retry rule, the stats, the
// memory fraction, the OOM and the trace every policy shares.
//
// Counting follows PyTorch's DeviceCachingAllocator: a block counts in allocation,
// allocated_bytes, active and requested_bytes when it is handed out; allocation and
// allocated_bytes drop when its caller frees it, active and requested_bytes when the free is
// complete (after the streams that used it, for a policy that waits for them).
#include "allocator/policy_allocator.h"

#include <algorithm>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "allocator/error.h"
#include "allocator/sizes.h"

namespace memgrad {
namespace {

void check_fraction(double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    throw ConfigError(
        fmt::format("set_memory_fraction: fraction must be in (0, 1], got {}", fraction),
        "per_process_memory_fraction", fmt::format("{}", fraction));
  }
}

// The counts PyTorch's DeviceCachingAllocator keeps per block (the header above), as file-local
// functions the hot paths inline.
void count_alloc(MemoryStats& s, StatPool pool, size_t nbytes, size_t requested) {
  const auto n = static_cast<int64_t>(nbytes);
  s.allocation.increase(pool, 1);
  s.allocated_bytes.increase(pool, n);
  s.active.increase(pool, 1);
  s.active_bytes.increase(pool, n);
  s.requested_bytes.increase(pool, static_cast<int64_t>(requested));
}

void count_free_requested(MemoryStats& s, StatPool pool, size_t nbytes) {
  s.allocation.decrease(pool, 1);
  s.allocated_bytes.decrease(pool, static_cast<int64_t>(nbytes));
}

void count_free_completed(MemoryStats& s, StatPool pool, size_t nbytes, size_t requested) {
  s.active.decrease(pool, 1);
  s.active_bytes.decrease(pool, static_cast<int64_t>(nbytes));
  s.requested_bytes.decrease(pool, static_cast<int64_t>(requested));
}

void count_split(MemoryStats& s, StatPool pool, SplitTally split) {
  s.inactive_split.change(pool, split.blocks);
  s.inactive_split_bytes.change(pool, split.bytes);
}

// The figures of an OOM on `source` for a request of `requested` bytes, of which the policy
// tried to obtain `alloc_size` from the source.
OutOfMemoryInfo oom_info(const MemorySource& source, size_t requested, size_t alloc_size,
                         const MemoryStats& stats) {
  OutOfMemoryInfo info;
  info.device = source.name();
  info.requested = requested;
  info.alloc_size = alloc_size;
  info.capacity = source.capacity();
  info.free = source.free_bytes();
  info.allowed = info.capacity;
  info.allocated = static_cast<size_t>(stats.allocated_bytes.all().current);
  info.reserved = static_cast<size_t>(stats.reserved_bytes.all().current);
  return info;
}

}  // namespace

PolicyAllocator::PolicyAllocator(MemorySource& source, double memory_fraction) : source_(source) {
  check_fraction(memory_fraction);
  fraction_set_ = memory_fraction != 1.0;
  fraction_ = memory_fraction;
}

PolicyAllocator::~PolicyAllocator() {
  for (const auto& [ptr, nbytes] : held_) source_.free(ptr, nbytes);
}

// ---- the frame ----

// The hot path (a cache hit) stays small: the OOM figures (over a kilobyte) are built in
// throw_too_large and throw_oom, out of line, and a Placement is built once, in place, and never
// copied (a copy read back right after the policy wrote it stalls the store buffer).
Block PolicyAllocator::allocate(size_t nbytes, StreamId stream) {
  if (nbytes == 0) return Block{nullptr, 0, 0, stream};
  if (nbytes > kMaxAllocationBytes) [[unlikely]]
    throw_too_large(nbytes);
  std::unique_lock<SpinMutex> guard(mutex_);
  if (hot_.state == Hot::Freed && nbytes == hot_.block.requested && stream == hot_.block.stream &&
      !trace_.enabled()) {
    hot_.state = Hot::Out;
    ++hot_.pairs;
    return hot_.block;
  }
  settle_hot();
  const Placement placed = place_with_retry(*this, Request{nbytes, stream, false});
  if (placed.ptr == nullptr) [[unlikely]]
    throw_oom(guard, nbytes, placed.nbytes, stream);
  MemoryStats& s = books_->stats_;
  count_alloc(s, placed.pool, placed.nbytes, nbytes);
  count_split(s, placed.pool, placed.split);
  if (is_oversize(placed.nbytes)) s.oversize_allocations.increase(1);
  trace_event(TraceAction::Alloc, placed.ptr, placed.nbytes, nbytes, stream);
  const Block block{placed.ptr, placed.nbytes, nbytes, stream, placed.pool, placed.record};
  // An adopted policy's placements reach the frame through its owner's place(): never kept.
  if (placed.repeatable && books_ == this) hot_ = HotBlock{block, placed.split, 0, Hot::Out};
  return block;
}

std::optional<std::vector<Block>> PolicyAllocator::seed(const SeedSegment& segment) {
  size_t tiled = 0;
  for (const SeedBlock& b : segment.blocks) {
    internal_check(
        b.nbytes > 0 && b.nbytes % kMinBlockSize == 0 && b.nbytes <= segment.nbytes - tiled,
        "seed: blocks must be multiples of 512 bytes that tile the segment");
    tiled += b.nbytes;
  }
  internal_check(
      segment.nbytes > 0 && tiled == segment.nbytes && segment.nbytes <= kMaxAllocationBytes,
      "seed: the blocks must tile the segment exactly");
  const auto guard = lock();
  const std::optional<Seeded> seeded = place_seed(segment);
  if (!seeded) return std::nullopt;
  MemoryStats& s = books_->stats_;
  std::vector<Block> out;
  size_t next = 0;
  for (const Placement& placed : seeded->allocated) {
    while (!segment.blocks[next].allocated) ++next;
    const size_t requested = segment.blocks[next++].requested;
    count_alloc(s, placed.pool, placed.nbytes, requested);
    if (is_oversize(placed.nbytes)) s.oversize_allocations.increase(1);
    trace_event(TraceAction::Alloc, placed.ptr, placed.nbytes, requested, segment.stream);
    out.push_back(
        Block{placed.ptr, placed.nbytes, requested, segment.stream, placed.pool, placed.record});
  }
  const StatPool pool = segment.small_pool ? StatPool::SmallPool : StatPool::LargePool;
  count_split(s, pool, seeded->free_splits);
  return out;
}

void PolicyAllocator::throw_too_large(size_t nbytes) const {
  OutOfMemoryInfo info = oom_info(source_, nbytes, nbytes, stats());
  info.too_large = true;
  throw OutOfMemoryError(std::move(info));
}

void PolicyAllocator::throw_oom(std::unique_lock<SpinMutex>& guard, size_t requested,
                                size_t alloc_size, StreamId stream) {
  OutOfMemoryInfo info = count_oom(requested, alloc_size, stream);
  guard.unlock();
  // Where the reserved but unallocated bytes are, after the policy released what it could.
  info.has_fragmentation = true;
  info.fragmentation = fragmentation(stream);
  throw OutOfMemoryError(std::move(info));
}

inline Placement PolicyAllocator::place_with_retry(PolicyAllocator& policy, Request request) {
  Placement placed = policy.place(request);
  if (placed.ptr == nullptr && policy.release_cached()) [[unlikely]] {
    policy.count_retry();
    request.retry = true;
    placed = policy.place(request);
  }
  return placed;
}

void PolicyAllocator::free(const Block& block) {
  if (block.ptr == nullptr) return;
  std::lock_guard<SpinMutex> guard(mutex_);
  if (hot_.state == Hot::Out && block.record == hot_.block.record && block.ptr == hot_.block.ptr &&
      !trace_.enabled()) {
    hot_.state = Hot::Freed;
    return;
  }
  settle_hot();
  free_locked(block, true);
}

inline void PolicyAllocator::free_locked(const Block& block, bool traced) {
  MemoryStats& s = books_->stats_;
  count_free_requested(s, block.pool, block.nbytes);
  if (is_oversize(block.nbytes)) s.oversize_allocations.decrease(1);
  if (traced) {
    trace_event(TraceAction::FreeRequested, block.ptr, block.nbytes, block.requested, block.stream);
  }
  // Other streams may still read it: it is reused only after their work recorded so far.
  if (defer_free(block)) return;
  complete_free(block, traced);
}

void PolicyAllocator::finish_free(const Block& block) { complete_free(block); }

inline void PolicyAllocator::complete_free(const Block& block, bool traced) {
  if (traced) {
    trace_event(TraceAction::FreeCompleted, block.ptr, block.nbytes, block.requested, block.stream);
  }
  const SplitTally split = take_back(block);
  count_split(books_->stats_, block.pool, split);
  count_free_completed(books_->stats_, block.pool, block.nbytes, block.requested);
}

void PolicyAllocator::settle_hot() const {
  if (hot_.state == Hot::None) return;
  const Hot state = std::exchange(hot_.state, Hot::None);
  auto& self = const_cast<PolicyAllocator&>(*this);
  if (hot_.pairs > 0) self.count_hot_pairs();
  // Freed by its caller while the trace was off (or the fast path would not have taken it).
  if (state == Hot::Freed) self.free_locked(hot_.block, false);
}

void PolicyAllocator::count_hot_pairs() {
  MemoryStats& s = stats_;
  const MemoryStats before = s;
  const Block& b = hot_.block;
  // The first pair exactly as free() and allocate() count it, peaks included ...
  count_free_requested(s, b.pool, b.nbytes);
  if (is_oversize(b.nbytes)) s.oversize_allocations.decrease(1);
  count_split(s, b.pool, SplitTally{} - hot_.split);
  count_free_completed(s, b.pool, b.nbytes, b.requested);
  count_alloc(s, b.pool, b.nbytes, b.requested);
  count_split(s, b.pool, hot_.split);
  if (is_oversize(b.nbytes)) s.oversize_allocations.increase(1);
  // ... and the others, which end where it ended: their totals only.
  s.repeat_accumulated(before, hot_.pairs - 1);
  hot_.pairs = 0;
}

void PolicyAllocator::record_stream(const Block& block, StreamId stream) {
  if (block.ptr == nullptr) return;
  const auto guard = lock();
  note_stream_use(block, stream);
}

void PolicyAllocator::empty_cache() {
  const auto guard = lock();
  release_cached();
}

std::vector<SegmentSnapshot> PolicyAllocator::snapshot() const {
  std::vector<SegmentSnapshot> out;
  {
    const auto guard = lock();
    describe(out);
  }
  std::sort(out.begin(), out.end(), [](const SegmentSnapshot& a, const SegmentSnapshot& b) {
    return a.address < b.address;
  });
  return out;
}

OutOfMemoryInfo PolicyAllocator::count_oom(size_t requested, size_t alloc_size, StreamId stream) {
  MemoryStats& s = books_->stats_;
  ++s.num_ooms;
  OutOfMemoryInfo info = oom_info(source_, requested, alloc_size, s);
  info.fraction_set = fraction_set();
  info.allowed = fraction_set() ? allowed_bytes() : source_.capacity();
  if (books_->trace_.enabled()) {
    books_->trace_.record(TraceAction::Oom, info.free, alloc_size, requested, stream,
                          s.allocated_bytes.all().current, s.reserved_bytes.all().current);
  }
  return info;
}

size_t PolicyAllocator::source_bytes_for(size_t nbytes) const {
  return round_up(nbytes, std::max<size_t>(source_.alignment(), 1));
}

FragmentationReport PolicyAllocator::fragmentation(StreamId stream) const {
  const std::vector<SegmentSnapshot> segments = snapshot();
  size_t budget = source_.free_bytes();
  {
    const auto guard = lock();
    const auto reserved = static_cast<size_t>(stats_.reserved_bytes.all().current);
    if (fraction_set_)
      budget = std::min(budget, allowed_bytes() - std::min(allowed_bytes(), reserved));
  }
  return fragmentation_of(segments, stream, budget,
                          [this](size_t n) { return source_bytes_for(n); });
}

// ---- the public figures ----

MemoryStats PolicyAllocator::stats() const {
  const auto guard = lock();
  return stats_;
}

void PolicyAllocator::reset_peak_stats() {
  const auto guard = lock();
  stats_.reset_peak();
}

void PolicyAllocator::reset_accumulated_stats() {
  const auto guard = lock();
  stats_.reset_accumulated();
}

size_t PolicyAllocator::memory_allocated() const {
  const auto guard = lock();
  return static_cast<size_t>(stats_.allocated_bytes.all().current);
}

size_t PolicyAllocator::memory_reserved() const {
  const auto guard = lock();
  return static_cast<size_t>(stats_.reserved_bytes.all().current);
}

void PolicyAllocator::set_memory_fraction(double fraction) {
  check_fraction(fraction);
  const auto guard = lock();
  fraction_set_ = true;
  fraction_ = fraction;
}

void PolicyAllocator::mark_in_trace(TraceAction action, uint64_t nbytes) {
  if (!trace_.enabled()) return;
  const auto guard = lock();
  trace_.record(action, 0, nbytes, 0, kDefaultStream, stats_.allocated_bytes.all().current,
                stats_.reserved_bytes.all().current);
}

// ---- what the hooks use ----

StatPool PolicyAllocator::pool_of_segment(size_t nbytes) {
  return nbytes <= kSmallBuffer ? StatPool::SmallPool : StatPool::LargePool;
}

bool PolicyAllocator::fraction_set() const { return books_->fraction_set_; }

size_t PolicyAllocator::allowed_bytes() const {
  return static_cast<size_t>(books_->fraction_ * static_cast<double>(source_.capacity()));
}

bool PolicyAllocator::within_fraction(size_t extra) const {
  return !fraction_set() || within_allowed(extra);
}

bool PolicyAllocator::within_allowed(size_t extra) const {
  return static_cast<size_t>(counted().reserved_bytes.all().current) + extra <= allowed_bytes();
}

void* PolicyAllocator::obtain_segment(StatPool pool, size_t nbytes, StreamId stream) {
  void* ptr = within_fraction(nbytes) ? source_.allocate(nbytes) : nullptr;
  if (ptr == nullptr) return nullptr;
  held_.emplace(ptr, nbytes);
  count_segment(pool, nbytes, 1);
  trace_event(TraceAction::SegmentAlloc, ptr, nbytes, 0, stream);
  return ptr;
}

void PolicyAllocator::return_segment(StatPool pool, void* ptr, size_t nbytes, StreamId stream) {
  internal_check(held_.erase(ptr) == 1, "returning a segment the policy does not hold");
  source_.free(ptr, nbytes);
  count_segment(pool, nbytes, -1);
  trace_event(TraceAction::SegmentFree, ptr, nbytes, 0, stream);
}

void PolicyAllocator::count_segment(StatPool pool, size_t nbytes, int sign) {
  MemoryStats& s = books_->stats_;
  s.segment.change(pool, sign);
  s.reserved_bytes.change(pool, sign * static_cast<int64_t>(nbytes));
  ++(sign > 0 ? s.num_device_alloc : s.num_device_free);
  if (is_oversize(nbytes)) s.oversize_segments.change(sign);
}

void PolicyAllocator::count_mapping(StatPool pool, void* ptr, size_t nbytes, size_t calls,
                                    int segments, bool mapped) {
  MemoryStats& s = books_->stats_;
  s.segment.change(pool, segments);
  s.reserved_bytes.change(pool, (mapped ? 1 : -1) * static_cast<int64_t>(nbytes));
  (mapped ? s.num_device_alloc : s.num_device_free) += static_cast<int64_t>(calls);
  trace_event(mapped ? TraceAction::SegmentMap : TraceAction::SegmentUnmap, ptr, nbytes, 0,
              kDefaultStream);
}

SegmentSnapshot PolicyAllocator::segment_at(const void* ptr, size_t nbytes, StatPool pool,
                                            StreamId stream) const {
  SegmentSnapshot s;
  s.address = trace_address(ptr);
  s.nbytes = nbytes;
  s.stream = stream;
  s.small_pool = pool == StatPool::SmallPool;
  return s;
}

void PolicyAllocator::count_sync_all_streams() { ++books_->stats_.num_sync_all_streams; }

void PolicyAllocator::count_retry() { ++books_->stats_.num_alloc_retries; }

void PolicyAllocator::set_max_split_size(size_t nbytes) {
  max_split_size_ = nbytes;
  stats_.max_split_size = nbytes == SIZE_MAX ? -1 : static_cast<int64_t>(nbytes);
}

void PolicyAllocator::record_event(TraceAction action, const void* ptr, size_t nbytes,
                                   size_t requested, StreamId stream) {
  const MemoryStats& s = books_->stats_;
  books_->trace_.record(action, trace_address(ptr), nbytes, requested, stream,
                        s.allocated_bytes.all().current, s.reserved_bytes.all().current);
}

// ---- a policy made of policies ----

void PolicyAllocator::adopt(PolicyAllocator& inner) { inner.books_ = books_; }

Placement PolicyAllocator::place_in(PolicyAllocator& inner, const Request& request) {
  Placement placed = place_with_retry(inner, Request{request.nbytes, request.stream, false});
  placed.repeatable = false;  // the outer policy decides where the next request goes
  return placed;
}

SplitTally PolicyAllocator::take_back_in(PolicyAllocator& inner, const Block& block) {
  return inner.take_back(block);
}

bool PolicyAllocator::defer_free_in(PolicyAllocator& inner, const Block& block) {
  return inner.defer_free(block);
}

bool PolicyAllocator::release_cached_in(PolicyAllocator& inner) { return inner.release_cached(); }

void PolicyAllocator::describe_in(const PolicyAllocator& inner, std::vector<SegmentSnapshot>& out) {
  inner.describe(out);
}

void PolicyAllocator::note_stream_use_in(PolicyAllocator& inner, const Block& block,
                                         StreamId stream) {
  inner.note_stream_use(block, stream);
}

}  // namespace memgrad
