// B3: memory_summary() and the memory stats. The measurement, for the program and its test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

// One statistic after the allocation sequence, relative to the start.
struct StatCheck {
  std::string name;       // "allocated_bytes.all.current", "segment.all.peak", ...
  bool is_bytes = false;  // bytes (true) or a count
  int64_t expected = 0;   // computed from the shapes and the allocator's rules
  int64_t measured = 0;
};

struct SummaryResult {
  std::vector<StatCheck> stats;
  std::string summary;  // memory_summary(device) after the sequence
};

// On `device`, after empty_cache() and resetting the peak and accumulated stats: allocates
// float32 tensors a (256 KiB, small pool), b (4,000 B, small pool), c (4 MiB, large pool, a split
// 20 MiB segment) and d (12 MiB x size, a segment of its own), frees d and b, and reads the stats.
SummaryResult measure_memory_summary(int64_t size, Device device);

}  // namespace memgrad::examples
