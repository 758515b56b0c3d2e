// B9: no_grad inference keeps no activations. The measurement, for the program and its test.
#pragma once

#include <cstdint>

#include "engine/device.h"

namespace memgrad::examples {

// Bytes above the baseline (parameters and input) for one forward pass.
struct ForwardMemory {
  int64_t peak = 0;  // the highest allocated during the forward
  int64_t kept = 0;  // allocated after it, while the output is held
};

struct NoGradResult {
  int64_t layers = 0, batch = 0, width = 0;
  int64_t activation_bytes = 0;  // one (batch, width) float32 activation, rounded
  ForwardMemory grad_mode;       // the forward with grad mode on (recorded)
  ForwardMemory no_grad;         // the same forward under NoGradGuard
  bool same_output = false;      // both forwards computed exactly the same values
};

// Runs `layers` Linear(256, 256) + ReLU layers on a float32 (64 size) x 256 batch on `device`,
// once in grad mode and once under NoGradGuard.
NoGradResult measure_no_grad(int64_t size, Device device, int64_t layers = 6);

}  // namespace memgrad::examples
