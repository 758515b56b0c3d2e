// The small allocator program the trace tests read, on any caching allocator: a small and a
// large block in a forward phase (the large one inside a nested op and label), frees in a
// backward phase, empty_cache, then an OOM (tests/allocator/trace_test.cpp checks its events,
// tests/interop/trace_writer_test.cpp the files written from them).
#pragma once

#include <doctest/doctest.h>

#include "allocator/caching_allocator.h"
#include "allocator/error.h"
#include "allocator/trace.h"

namespace memgrad::testing {

inline void run_trace_program(CachingAllocator& alloc) {
  Block a;
  Block b;
  {
    TracePhaseScope phase("forward");
    TraceOpScope op("matmul");
    a = alloc.allocate(4000);
    {
      TraceOpScope inner("relu");
      TraceLabelScope label("layer 1");
      b = alloc.allocate(5 * kMiB);
    }
    alloc.free(a);
  }
  TracePhaseScope phase("backward");
  alloc.free(b);
  alloc.empty_cache();
  CHECK_THROWS_AS(alloc.allocate(100 * kMiB), OutOfMemoryError);
}

}  // namespace memgrad::testing
