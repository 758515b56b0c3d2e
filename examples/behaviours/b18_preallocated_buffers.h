// B18: preallocated, reused buffers. The measurement, for the program and its test.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

// Per-step allocator counts of the same computation written two ways.
struct BufferLoopResult {
  int64_t rows = 0, features = 0;
  int64_t tensor_bytes = 0;  // one (rows x features) float32 result, rounded
  // Allocations made by each step (MemoryStats allocation.all().allocated delta) and the bytes
  // they took (allocated_bytes.all().allocated delta).
  std::vector<int64_t> out_of_place_allocs, out_of_place_bytes;
  std::vector<int64_t> reused_allocs, reused_bytes;
  int64_t expected_out_of_place_allocs = 0;  // one result per op
  int64_t expected_warmup_allocs = 0;        // the first step sizes the two buffers
  bool same_values = false;                  // both loops accumulated bit-identical results
};

// Runs `steps` steps of softmax(exp((x @ w + b) * s)) accumulated into a running sum, on
// `device`: once out of place, once with mm_out / add_out / mul_out / exp_out / softmax_out into
// two buffers that start empty. x is (64 size) x 128.
BufferLoopResult measure_buffer_reuse(int64_t size, Device device, int steps = 5);

}  // namespace memgrad::examples
