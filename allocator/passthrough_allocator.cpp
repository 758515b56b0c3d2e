// PassthroughAllocator: each block is its own segment.
#include "allocator/passthrough_allocator.h"

#include <algorithm>
#include <string>

#include "allocator/caching_allocator.h"
#include "allocator/error.h"

namespace memgrad {
namespace {

StatPool pool_of(size_t nbytes) {
  return nbytes <= kSmallSize ? StatPool::SmallPool : StatPool::LargePool;
}

}  // namespace

PassthroughAllocator::PassthroughAllocator(MemorySource& source) : Allocator(source) {}

Block PassthroughAllocator::allocate_block(size_t nbytes, StreamId stream) {
  const size_t size = (nbytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto reserved = static_cast<size_t>(stats_.reserved_bytes.all().current);
  const auto allowed = static_cast<size_t>(fraction_ * static_cast<double>(source_.capacity()));
  void* ptr = reserved + size <= allowed ? source_.allocate(size) : nullptr;
  if (ptr == nullptr) {
    throw_out_of_memory(stats_, nbytes, size, stream, allowed, fraction_ != 1.0);
  }
  const StatPool sp = pool_of(size);
  const auto n = static_cast<int64_t>(size);
  stats_.segment.increase(sp, 1);
  stats_.reserved_bytes.increase(sp, n);
  stats_.allocation.increase(sp, 1);
  stats_.allocated_bytes.increase(sp, n);
  stats_.active.increase(sp, 1);
  stats_.active_bytes.increase(sp, n);
  stats_.requested_bytes.increase(sp, static_cast<int64_t>(nbytes));
  ++stats_.num_device_alloc;
  Block block{ptr, size, nbytes, stream, ptr};
  live_.emplace(ptr, block);
  if (trace_.enabled()) {
    const uint64_t address = trace_address(ptr);
    const int64_t now = stats_.allocated_bytes.all().current;
    trace_.record(TraceAction::SegmentAlloc, address, size, 0, stream, now - n, now);
    trace_.record(TraceAction::Alloc, address, size, nbytes, stream, now, now);
  }
  return block;
}

void PassthroughAllocator::free(const Block& block) {
  if (block.ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(block.ptr);
  internal_check(it != live_.end(), "free of a block this allocator does not hold");
  live_.erase(it);
  source_.free(block.ptr, block.nbytes);
  const StatPool sp = pool_of(block.nbytes);
  const auto n = static_cast<int64_t>(block.nbytes);
  stats_.segment.decrease(sp, 1);
  stats_.reserved_bytes.decrease(sp, n);
  stats_.allocation.decrease(sp, 1);
  stats_.allocated_bytes.decrease(sp, n);
  stats_.active.decrease(sp, 1);
  stats_.active_bytes.decrease(sp, n);
  stats_.requested_bytes.decrease(sp, static_cast<int64_t>(block.requested));
  ++stats_.num_device_free;
  if (trace_.enabled()) {
    const uint64_t address = trace_address(block.ptr);
    const int64_t now = stats_.allocated_bytes.all().current;
    trace_.record(TraceAction::FreeRequested, address, block.nbytes, block.requested,
                  block.stream, now, now + n);
    trace_.record(TraceAction::FreeCompleted, address, block.nbytes, block.requested,
                  block.stream, now, now + n);
    trace_.record(TraceAction::SegmentFree, address, block.nbytes, 0, block.stream, now, now);
  }
}

MemoryStats PassthroughAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void PassthroughAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.reset_peak();
}

void PassthroughAllocator::reset_accumulated_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.reset_accumulated();
}

size_t PassthroughAllocator::memory_allocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(stats_.allocated_bytes.all().current);
}

size_t PassthroughAllocator::memory_reserved() const { return memory_allocated(); }

std::vector<SegmentSnapshot> PassthroughAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const uintptr_t base = source_.address_base();
  std::vector<SegmentSnapshot> out;
  for (const auto& [ptr, b] : live_) {
    const uint64_t address = reinterpret_cast<uintptr_t>(b.ptr) - base;
    SegmentSnapshot s;
    s.address = address;
    s.nbytes = b.nbytes;
    s.stream = b.stream;
    s.small_pool = b.nbytes <= kSmallSize;
    s.blocks.push_back({address, b.nbytes, b.requested, true});
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentSnapshot& a, const SegmentSnapshot& b) { return a.address < b.address; });
  return out;
}

void PassthroughAllocator::set_memory_fraction(double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    throw ConfigError("set_memory_fraction: fraction must be in (0, 1], got " +
                          std::to_string(fraction),
                      "per_process_memory_fraction", std::to_string(fraction));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  fraction_ = fraction;
}

}  // namespace memgrad
