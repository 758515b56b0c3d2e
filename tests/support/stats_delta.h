// Test helper: snapshot an allocator's stats and read exact byte deltas afterwards.
//
//   StatsDelta d(allocator);
//   ... act ...
//   CHECK_EQ(d.allocated(), 0);   // a view adds nothing
#pragma once

#include <cstdint>

#include "allocator/policy_allocator.h"

namespace memgrad::testing {

class StatsDelta {
 public:
  explicit StatsDelta(const PolicyAllocator& allocator)
      : allocator_(allocator), before_(allocator.stats()) {}

  int64_t allocated() const {
    return now().allocated_bytes.all().current - before_.allocated_bytes.all().current;
  }
  int64_t reserved() const {
    return now().reserved_bytes.all().current - before_.reserved_bytes.all().current;
  }
  int64_t requested() const {
    return now().requested_bytes.all().current - before_.requested_bytes.all().current;
  }
  int64_t segments() const { return now().segment.all().current - before_.segment.all().current; }
  int64_t allocations() const {
    return now().allocation.all().current - before_.allocation.all().current;
  }
  // Segments obtained from the source since the snapshot (cache misses that reached the source).
  int64_t source_allocs() const { return now().num_device_alloc - before_.num_device_alloc; }

 private:
  MemoryStats now() const { return allocator_.stats(); }
  const PolicyAllocator& allocator_;
  MemoryStats before_;
};

}  // namespace memgrad::testing
