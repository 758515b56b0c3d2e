// PolicyAllocator: stats, memory fraction, OOM and trace for the lab policies.
#include "allocator/policies/policy_allocator.h"

#include <string>

#include <fmt/format.h>

#include "allocator/caching_allocator.h"
#include "allocator/error.h"

namespace memgrad {
namespace {

void check_fraction(double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    throw ConfigError(fmt::format("set_memory_fraction: fraction must be in (0, 1], got {}",
                                  fraction),
                      "per_process_memory_fraction", fmt::format("{}", fraction));
  }
}

}  // namespace

PolicyAllocator::PolicyAllocator(MemorySource& source, double memory_fraction)
    : Allocator(source) {
  check_fraction(memory_fraction);
  fraction_set_ = memory_fraction != 1.0;
  fraction_ = memory_fraction;
}

StatPool PolicyAllocator::pool_of_segment(size_t nbytes) {
  return nbytes <= kSmallBuffer ? StatPool::SmallPool : StatPool::LargePool;
}

size_t PolicyAllocator::allowed_bytes() const {
  return static_cast<size_t>(fraction_ * static_cast<double>(source_.capacity()));
}

bool PolicyAllocator::within_fraction(size_t extra) const {
  if (!fraction_set_) return true;
  return static_cast<size_t>(stats_.reserved_bytes.all().current) + extra <= allowed_bytes();
}

void* PolicyAllocator::source_allocate(size_t nbytes) {
  return within_fraction(nbytes) ? source_.allocate(nbytes) : nullptr;
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
  const auto n = static_cast<int64_t>(nbytes);
  stats_.allocation.decrease(pool, 1);
  stats_.allocated_bytes.decrease(pool, n);
  stats_.active.decrease(pool, 1);
  stats_.active_bytes.decrease(pool, n);
  stats_.requested_bytes.decrease(pool, static_cast<int64_t>(requested));
}

void PolicyAllocator::count_split_change(StatPool pool, SplitTally before, SplitTally after) {
  const int64_t blocks = after.blocks - before.blocks;
  const int64_t bytes = after.bytes - before.bytes;
  if (blocks > 0) stats_.inactive_split.increase(pool, blocks);
  if (blocks < 0) stats_.inactive_split.decrease(pool, -blocks);
  if (bytes > 0) stats_.inactive_split_bytes.increase(pool, bytes);
  if (bytes < 0) stats_.inactive_split_bytes.decrease(pool, -bytes);
}

void PolicyAllocator::throw_oom(size_t requested, size_t alloc_size, StreamId stream) {
  throw_out_of_memory(stats_, requested, alloc_size, stream,
                      fraction_set_ ? allowed_bytes() : source_.capacity(), fraction_set_);
}

void PolicyAllocator::record_trace(TraceAction action, const void* ptr, size_t nbytes,
                                   size_t requested, StreamId stream) {
  trace_.record(action, trace_address(ptr), nbytes, requested, stream, stats_.allocated_bytes.all().current,
                stats_.reserved_bytes.all().current);
}

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

}  // namespace memgrad
