// The passthrough policy: no cache. Every allocate() is a source call and every free() returns
// the bytes to the source at once, so allocated == reserved at all times (PyTorch's
// PYTORCH_NO_CUDA_MEMORY_CACHING=1, and what libtorch's CPU allocator does with malloc).
// It is the baseline the caching policy is measured against.
#pragma once

#include <unordered_map>

#include "allocator/config.h"
#include "allocator/policy_allocator.h"

namespace memgrad {

class PassthroughAllocator final : public PolicyAllocator {
 public:
  // Uses `config.memory_fraction`; the caching-only options are ignored. Throws ConfigError.
  explicit PassthroughAllocator(MemorySource& source, const AllocatorConfig& config = {});

 protected:
  // Allocates: nbytes rounded up to 512 (the granularity device allocators use), from the source.
  // A request that would take reserved bytes past fraction x capacity fails without a source
  // call, fraction set or not. Throws OutOfMemoryError when the source has no room (there is no
  // cache to release).
  Block allocate_block(size_t nbytes, StreamId stream) override;

 public:
  void free(const Block& block) override;
  // Nothing is cached, so nothing to release.
  void empty_cache() override {}
  // One segment per live block.
  std::vector<SegmentSnapshot> snapshot() const override;
  std::string_view policy_name() const override { return "passthrough"; }

 private:
  std::unordered_map<void*, Block> live_;  // by pointer: for free() and snapshots
};

}  // namespace memgrad
