// B1: allocated vs reserved memory; the caching allocator keeps freed blocks. The measurement,
// for the program and its test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

// The device's figures after one step, relative to the start (after empty_cache()).
struct ReserveStep {
  std::string what;                // "x = empty([512, 1024])", "x freed", ...
  int64_t expected_allocated = 0;  // bytes, computed from the shape and the allocator's rules
  int64_t allocated = 0;           // memory_allocated() minus the start
  int64_t expected_reserved = 0;
  int64_t reserved = 0;           // memory_reserved() minus the start
  int64_t expected_segments = 0;  // segments obtained from the device since the start
  int64_t segments = 0;           // num_device_alloc minus the start
};

struct ReserveResult {
  std::vector<ReserveStep> steps;  // start, x allocated, x freed, y allocated (same size as x)
  // y.data_ptr() minus the freed x's data_ptr(), in bytes: 0 when y reuses x's cached block.
  int64_t reuse_offset = 0;
};

// Allocates a float32 tensor x of (512 size) x 1024 on `device`, frees it, and allocates a
// tensor y of the same size, reading allocated / reserved / segment counts after each step.
// Starts with empty_cache() so that earlier cached blocks do not serve the requests.
ReserveResult measure_allocated_vs_reserved(int64_t size, Device device);

}  // namespace memgrad::examples
