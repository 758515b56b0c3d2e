// B12: detach() drops the graph and shares storage. The measurement, for the program and its
// test.
#pragma once

#include <cstdint>

#include "engine/device.h"

namespace memgrad::examples {

struct DetachResult {
  int64_t layers = 0, batch = 0, width = 0;
  int64_t activation_bytes = 0;  // one (batch, width) float32 activation, rounded
  int64_t kept_by_output = 0;    // above the baseline while the output y is held (its graph)
  int64_t detach_bytes = 0;      // allocated by d = y.detach()
  bool shares_storage = false;   // d and y share one storage
  int64_t data_offset = 1;       // d.data_ptr() - y.data_ptr(), in bytes
  bool d_requires_grad = true;   // d needs no gradient
  bool d_is_leaf = false;        // ... and has no history
  uint32_t y_version_before = 0, y_version_after = 0;  // around an in-place op on d
  int64_t kept_by_detached = 0;  // above the baseline once y is reset and only d is left
};

// Runs `layers` Linear(256, 256) + ReLU layers on a float32 (64 size) x 256 batch on `device`.
DetachResult measure_detach(int64_t size, Device device, int64_t layers = 4);

}  // namespace memgrad::examples
