// PolicyAllocator: the request guard, stats, memory fraction, OOM and trace every policy shares.
#include "allocator/policy_allocator.h"

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

Block PolicyAllocator::allocate(size_t nbytes, StreamId stream) {
  if (nbytes == 0) return Block{nullptr, 0, 0, stream, nullptr};
  if (nbytes > kMaxAllocationBytes) [[unlikely]] {
    OutOfMemoryInfo info = oom_info(source_, nbytes, nbytes, stats());
    info.too_large = true;
    throw OutOfMemoryError(std::move(info));
  }
  try {
    return allocate_block(nbytes, stream);
  } catch (const OutOfMemoryError& e) {
    // The figures of the failure, with where the reserved but unallocated bytes are (taken
    // after the policy released what it could, outside its lock).
    OutOfMemoryInfo info = e.info();
    info.has_fragmentation = true;
    info.fragmentation = fragmentation(stream);
    throw OutOfMemoryError(std::move(info));
  }
}

size_t PolicyAllocator::source_bytes_for(size_t nbytes) const {
  return round_up(nbytes, std::max<size_t>(source_.alignment(), 1));
}

FragmentationReport PolicyAllocator::fragmentation(StreamId stream) const {
  const std::vector<SegmentSnapshot> segments = snapshot();
  size_t budget = source_.free_bytes();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto reserved = static_cast<size_t>(stats_.reserved_bytes.all().current);
    if (fraction_set_) budget = std::min(budget, allowed_bytes() - std::min(allowed_bytes(), reserved));
  }
  return fragmentation_of(segments, stream, budget,
                          [this](size_t n) { return source_bytes_for(n); });
}

// ---- the public figures ----

MemoryStats PolicyAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void PolicyAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.reset_peak();
}

void PolicyAllocator::reset_accumulated_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.reset_accumulated();
}

size_t PolicyAllocator::memory_allocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(stats_.allocated_bytes.all().current);
}

size_t PolicyAllocator::memory_reserved() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(stats_.reserved_bytes.all().current);
}

void PolicyAllocator::set_memory_fraction(double fraction) {
  check_fraction(fraction);
  std::lock_guard<std::mutex> lock(mutex_);
  fraction_set_ = true;
  fraction_ = fraction;
}

// ---- helpers for the policies ----

StatPool PolicyAllocator::pool_of_segment(size_t nbytes) {
  return nbytes <= kSmallBuffer ? StatPool::SmallPool : StatPool::LargePool;
}

size_t PolicyAllocator::allowed_bytes() const {
  return static_cast<size_t>(fraction_ * static_cast<double>(source_.capacity()));
}

bool PolicyAllocator::within_fraction(size_t extra) const {
  return !fraction_set_ || within_allowed(extra);
}

bool PolicyAllocator::within_allowed(size_t extra) const {
  return static_cast<size_t>(stats_.reserved_bytes.all().current) + extra <= allowed_bytes();
}

void* PolicyAllocator::obtain_segment(StatPool pool, size_t nbytes, StreamId stream) {
  void* ptr = within_fraction(nbytes) ? source_.allocate(nbytes) : nullptr;
  if (ptr == nullptr) return nullptr;
  count_segment_alloc(pool, nbytes);
  trace_event(TraceAction::SegmentAlloc, ptr, nbytes, 0, stream);
  return ptr;
}

void PolicyAllocator::return_segment(StatPool pool, void* ptr, size_t nbytes, StreamId stream) {
  source_.free(ptr, nbytes);
  count_segment_free(pool, nbytes);
  trace_event(TraceAction::SegmentFree, ptr, nbytes, 0, stream);
}

void PolicyAllocator::count_segment_alloc(StatPool pool, size_t nbytes) {
  stats_.segment.increase(pool, 1);
  stats_.reserved_bytes.increase(pool, static_cast<int64_t>(nbytes));
  ++stats_.num_device_alloc;
}

void PolicyAllocator::count_segment_free(StatPool pool, size_t nbytes) {
  stats_.segment.decrease(pool, 1);
  stats_.reserved_bytes.decrease(pool, static_cast<int64_t>(nbytes));
  ++stats_.num_device_free;
}

void PolicyAllocator::count_alloc(StatPool pool, size_t nbytes, size_t requested) {
  const auto n = static_cast<int64_t>(nbytes);
  stats_.allocation.increase(pool, 1);
  stats_.allocated_bytes.increase(pool, n);
  stats_.active.increase(pool, 1);
  stats_.active_bytes.increase(pool, n);
  stats_.requested_bytes.increase(pool, static_cast<int64_t>(requested));
}

void PolicyAllocator::count_free(StatPool pool, size_t nbytes, size_t requested) {
  count_free_requested(pool, nbytes);
  count_free_completed(pool, nbytes, requested);
}

void PolicyAllocator::count_free_requested(StatPool pool, size_t nbytes) {
  stats_.allocation.decrease(pool, 1);
  stats_.allocated_bytes.decrease(pool, static_cast<int64_t>(nbytes));
}

void PolicyAllocator::count_free_completed(StatPool pool, size_t nbytes, size_t requested) {
  stats_.active.decrease(pool, 1);
  stats_.active_bytes.decrease(pool, static_cast<int64_t>(nbytes));
  stats_.requested_bytes.decrease(pool, static_cast<int64_t>(requested));
}

void PolicyAllocator::count_split_delta(StatPool pool, int64_t blocks, int64_t bytes) {
  if (blocks > 0) stats_.inactive_split.increase(pool, blocks);
  if (blocks < 0) stats_.inactive_split.decrease(pool, -blocks);
  if (bytes > 0) stats_.inactive_split_bytes.increase(pool, bytes);
  if (bytes < 0) stats_.inactive_split_bytes.decrease(pool, -bytes);
}

void PolicyAllocator::throw_oom(size_t requested, size_t alloc_size, StreamId stream) {
  ++stats_.num_ooms;
  OutOfMemoryInfo info = oom_info(source_, requested, alloc_size, stats_);
  info.fraction_set = fraction_set_;
  info.allowed = fraction_set_ ? allowed_bytes() : source_.capacity();
  if (trace_.enabled()) {
    trace_.record(TraceAction::Oom, info.free, alloc_size, requested, stream,
                  stats_.allocated_bytes.all().current, stats_.reserved_bytes.all().current);
  }
  throw OutOfMemoryError(std::move(info));
}

void PolicyAllocator::mark_in_trace(TraceAction action, uint64_t nbytes) {
  if (!trace_.enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  trace_.record(action, 0, nbytes, 0, kDefaultStream, stats_.allocated_bytes.all().current,
                stats_.reserved_bytes.all().current);
}

void PolicyAllocator::record_trace(TraceAction action, const void* ptr, size_t nbytes,
                                   size_t requested, StreamId stream) {
  trace_.record(action, trace_address(ptr), nbytes, requested, stream,
                stats_.allocated_bytes.all().current, stats_.reserved_bytes.all().current);
}

}  // namespace memgrad
