// B13: activation checkpointing trades recomputation for memory. The measurement, for the
// program and its test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

struct CheckpointRow {
  int64_t segments = 0;
  std::string sizes;  // layers per segment, "4+4+4+4"
  // Bytes above parameters, gradients and input (expected from the model in the .cpp).
  int64_t kept_expected = 0, kept_measured = 0;               // after the forward
  int64_t peak_expected = 0, peak_measured = 0;               // during forward + backward
  int64_t linear_forwards_expected = 0, linear_forwards = 0;  // Linear forwards executed
  double milliseconds = 0;                                    // forward + backward, wall clock
  bool grads_equal = false;  // bit-exact with the plain run (segments = 1)
};

struct CheckpointResult {
  int64_t layers = 0, batch = 0, width = 0;
  int64_t activation_bytes = 0;     // one (batch, width) float32 activation, rounded
  std::vector<CheckpointRow> rows;  // rows[0] is the plain run
};

// n = `layers` blocks of Linear(256, 256) + ReLU on a float32 (64 size) x 256 batch on
// `device`, run plainly and with checkpoint_sequential for each segment count in `segments`
// (1 = plain; default 1, 2, 3, 4, 6, 8, n, those <= n). Each configuration runs `repeats`
// times; the time is the fastest, the memory readings are the first run's.
CheckpointResult measure_checkpointing(int64_t size, Device device, int64_t layers = 16,
                                       std::vector<int64_t> segments = {}, int64_t repeats = 3);

}  // namespace memgrad::examples
