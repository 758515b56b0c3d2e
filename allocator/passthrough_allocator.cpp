// PassthroughAllocator: each block is its own segment.
#include "allocator/passthrough_allocator.h"

#include <algorithm>

#include "allocator/error.h"
#include "allocator/sizes.h"

namespace memgrad {
namespace {

// The pool of a block (and so of its segment): small up to 1 MiB, as the caching policy's blocks.
StatPool pool_of(size_t nbytes) {
  return nbytes <= kSmallSize ? StatPool::SmallPool : StatPool::LargePool;
}

}  // namespace

PassthroughAllocator::PassthroughAllocator(MemorySource& source, const AllocatorConfig& config)
    : PolicyAllocator(source, config.memory_fraction) {}

Block PassthroughAllocator::allocate_block(size_t nbytes, StreamId stream) {
  const size_t size = round_up(nbytes, kMinBlockSize);
  std::lock_guard<std::mutex> lock(mutex_);
  const StatPool sp = pool_of(size);
  void* ptr = within_allowed(size) ? obtain_segment(sp, size, stream) : nullptr;
  if (ptr == nullptr) throw_oom(nbytes, size, stream);
  count_alloc(sp, size, nbytes);
  trace_event(TraceAction::Alloc, ptr, size, nbytes, stream);
  Block block{ptr, size, nbytes, stream, ptr};
  live_.emplace(ptr, block);
  return block;
}

void PassthroughAllocator::free(const Block& block) {
  if (block.ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(block.ptr);
  internal_check(it != live_.end(), "free of a block this allocator does not hold");
  live_.erase(it);
  const StatPool sp = pool_of(block.nbytes);
  count_free(sp, block.nbytes, block.requested);
  trace_event(TraceAction::FreeRequested, block.ptr, block.nbytes, block.requested, block.stream);
  trace_event(TraceAction::FreeCompleted, block.ptr, block.nbytes, block.requested, block.stream);
  return_segment(sp, block.ptr, block.nbytes, block.stream);
}

std::vector<SegmentSnapshot> PassthroughAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<SegmentSnapshot> out;
  for (const auto& [ptr, b] : live_) {
    const uint64_t address = trace_address(b.ptr);
    SegmentSnapshot s;
    s.address = address;
    s.nbytes = b.nbytes;
    s.stream = b.stream;
    s.small_pool = b.nbytes <= kSmallSize;
    s.blocks.push_back({address, b.nbytes, b.requested, true, false});
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentSnapshot& a, const SegmentSnapshot& b) { return a.address < b.address; });
  return out;
}

}  // namespace memgrad
