// The passthrough policy: no cache. Every allocate() is a source call and every free() returns
// the bytes to the source at once, so allocated == reserved at all times (PyTorch's
// PYTORCH_NO_CUDA_MEMORY_CACHING=1, and what libtorch's CPU allocator does with malloc).
// It is the baseline the caching policy is measured against.
#pragma once

#include <mutex>
#include <unordered_map>

#include "allocator/allocator.h"

namespace memgrad {

class PassthroughAllocator final : public Allocator {
 public:
  explicit PassthroughAllocator(MemorySource& source);

 protected:
  // Allocates: nbytes rounded up to 512 (the granularity device allocators use), from the source.
  // Throws OutOfMemoryError when the source has no room (there is no cache to release).
  Block allocate_block(size_t nbytes, StreamId stream) override;

 public:
  void free(const Block& block) override;
  // Nothing is cached, so nothing to release.
  void empty_cache() override {}
  MemoryStats stats() const override;
  void reset_peak_stats() override;
  void reset_accumulated_stats() override;
  size_t memory_allocated() const override;
  size_t memory_reserved() const override;
  // One segment per live block.
  std::vector<SegmentSnapshot> snapshot() const override;
  void set_memory_fraction(double fraction) override;
  std::string_view policy_name() const override { return "passthrough"; }

 private:
  mutable std::mutex mutex_;
  MemoryStats stats_;
  double fraction_ = 1.0;
  std::unordered_map<void*, Block> live_;  // by pointer: for free() and snapshots
};

}  // namespace memgrad
