// B2: empty_cache() frees cached, never allocated memory. The measurement, for the program and
// its test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

// The device's figures after one step, relative to the start (after empty_cache()).
struct CacheStep {
  std::string what;
  int64_t expected_allocated = 0;  // bytes, from the shapes and the allocator's rules
  int64_t allocated = 0;
  int64_t expected_reserved = 0;
  int64_t reserved = 0;
  int64_t expected_non_releasable = 0;  // inactive_split_bytes: free blocks in split segments
  int64_t non_releasable = 0;
};

struct EmptyCacheResult {
  std::vector<CacheStep> steps;
  int64_t split_segment = 0;  // bytes of the segment holding the small live tensor c
  // The allocated, reserved and non-releasable rows of memory_summary() after the first
  // empty_cache(), one per line.
  std::string summary_rows;
};

// On `device`: allocates a (12 MiB x size), b (16 MiB x size), each in a segment of its own,
// and c (2 MiB), the front of a 20 MiB segment that is split; frees a and b; calls empty_cache()
// (c's segment stays: it holds a live block); frees c; calls empty_cache() again.
EmptyCacheResult measure_empty_cache(int64_t size, Device device);

}  // namespace memgrad::examples
