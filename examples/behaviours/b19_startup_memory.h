// B19: start-up memory of a training run. The measurement, for the program and its test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

// One phase of the first training steps: the change of allocated bytes it caused.
struct StartupPhase {
  std::string what;
  int64_t expected = 0;  // from the shapes and the 512-byte rounding, computed beforehand
  int64_t measured = 0;
};

struct StartupMemoryResult {
  int64_t inputs = 0, hidden = 0, classes = 0, batch = 0;
  int64_t parameter_bytes = 0;   // the model's parameters, each rounded
  int64_t activation_bytes = 0;  // one (batch x hidden) float32 activation, rounded
  int64_t logits_bytes = 0;      // one (batch x classes) float32 tensor, rounded
  int64_t workspace_bytes = 0;   // cuBLAS's workspace, taken by the first forward (cuda only)
  std::vector<StartupPhase> phases;
  int64_t adam_state_before = 0;  // Optimizer::state_nbytes() before the first step (0)
  int64_t adam_state_after = 0;   // and after it (2 x the parameters)
  int64_t peak_above_start = 0;   // peak allocated during the first step, above its start
};

// A Linear(256, h) -> ReLU -> Linear(h, h) -> ReLU -> Linear(h, 10) classifier (h = 256 size)
// trained with Adam on one synthetic batch of 64 on `device`: the memory each start-up phase adds
// (data, model, first forward, backward, optimizer step, zero_grad) and a second whole step.
StartupMemoryResult measure_startup_memory(int64_t size, Device device);

}  // namespace memgrad::examples
