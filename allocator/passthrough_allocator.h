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

  std::string_view policy_name() const override { return "passthrough"; }

 protected:
  // Allocates: nbytes rounded up to 512 (the granularity device allocators use), a segment of
  // its own from the source. A request that would take reserved bytes past fraction x capacity
  // is refused without a source call, fraction set or not.
  Placement place(const Request& request) override;
  // Returns the block's segment to the source.
  SplitTally take_back(const Block& block) override;
  // Nothing is cached, so nothing to release and nothing to retry.
  bool release_cached() override { return false; }
  // One segment per live block.
  void describe(std::vector<SegmentSnapshot>& out) const override;

 private:
  struct Live {
    size_t requested = 0;
    StreamId stream = kDefaultStream;
  };
  std::unordered_map<void*, Live> live_;  // by block: what snapshots show
};

}  // namespace memgrad
