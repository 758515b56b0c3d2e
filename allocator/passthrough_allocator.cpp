// PassthroughAllocator: each block is its own segment.
#include "allocator/passthrough_allocator.h"

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

Placement PassthroughAllocator::place(const Request& request) {
  const size_t size = round_up(request.nbytes, kMinBlockSize);
  const StatPool pool = pool_of(size);
  void* ptr = within_allowed(size) ? obtain_segment(pool, size, request.stream) : nullptr;
  if (ptr == nullptr) return Placement::refused(size);
  live_.emplace(ptr, Live{request.nbytes, request.stream});
  return Placement{ptr, size, pool, ptr};
}

SplitTally PassthroughAllocator::take_back(const Block& block) {
  internal_check(live_.erase(block.ptr) == 1, "free of a block this allocator does not hold");
  return_segment(block.pool, block.ptr, block.nbytes, block.stream);
  return {};
}

void PassthroughAllocator::describe(std::vector<SegmentSnapshot>& out) const {
  for (const auto& [ptr, live] : live_) {
    const size_t nbytes = round_up(live.requested, kMinBlockSize);
    SegmentSnapshot s = segment_at(ptr, nbytes, pool_of(nbytes), live.stream);
    s.blocks.push_back({s.address, nbytes, live.requested, true, false});
    out.push_back(std::move(s));
  }
}

}  // namespace memgrad
