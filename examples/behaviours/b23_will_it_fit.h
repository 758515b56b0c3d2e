// B23: a training step's memory, estimated before it runs (meta devices). The measurement, for
// the program and its test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"
#include "examples/charlm/charlm_model.h"

namespace memgrad::examples {

// One AdamW training step of a CharLM from an empty device, phase by phase (bytes allocated after
// each, as memory_allocated reads them), or where it ran out of memory.
struct StepMemory {
  int64_t after_init = 0, after_forward = 0, after_backward = 0, after_step = 0,
          after_zero_grad = 0;
  int64_t peak_allocated = 0, peak_reserved = 0;
  int64_t device_allocs = 0;  // segments (and pages) obtained from the device
  bool out_of_memory = false;
  const char* oom_during = "";  // the part of the step that ran out: "forward", ...
  std::string oom_message;      // the OutOfMemoryError's first line
};

struct WillItFitResult {
  CharLMShape small;  // the configuration run for real and estimated
  int64_t small_batch = 0;
  std::string real_device, meta_device;
  int64_t capacity = 0;
  StepMemory real, estimate;
  CharLMShape large;  // GPT-2 XL-shaped: estimated only
  int64_t large_parameters = 0;
  std::vector<std::pair<int64_t, StepMemory>> large_runs;  // (capacity, the step at batch 1)
  int64_t largest_batch = 0;  // the largest batch whose step fits in large_runs[0]'s capacity
  std::vector<std::pair<int64_t, bool>> batch_probes;  // (batch, fits), in the order tried
};

// The step of a CharLM of `shape` at `batch` on `device` (a fresh allocator of `capacity` bytes:
// a sim:N or meta:N device).
StepMemory measure_step(const CharLMShape& shape, int64_t batch, Device device, int64_t capacity);

// The small configuration (scaled by `size`) on sim:`index` and meta:`index`, 1 GiB each; the
// GPT-2 XL-shaped step (48 x 1600, 25 heads, context 1024, AdamW) on meta:`index` devices of
// 80 GiB and 16 GiB, and the largest batch that fits in 80 GiB (doubling, then bisecting).
// `large_layers` < 48 makes the large model shallower (the test).
WillItFitResult measure_will_it_fit(int64_t size, int index, int64_t large_layers = 48);

}  // namespace memgrad::examples
