// B21: model parallelism across two devices. The measurement, for the program and its test.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

// One phase of the training step: what it added on each of the two devices.
struct DeviceStage {
  std::string what;
  std::array<int64_t, 2> expected{};  // from the shapes, computed before running
  std::array<int64_t, 2> measured{};  // allocated bytes after minus before, per device
};

struct ModelParallelResult {
  std::array<Device, 2> devices{Device("cpu"), Device("cpu")};
  int64_t inputs = 0, hidden = 0, classes = 0, batch = 0;
  std::array<int64_t, 2> parameter_bytes{};  // layers 1-2 on the first device, 3-4 on the second
  int64_t activation_bytes = 0;              // one (batch x hidden) float32 tensor, rounded
  std::vector<DeviceStage> stages;
  std::array<int64_t, 2> peak{};  // max_memory_allocated of each device during the step
  // After backward: every parameter has a non-zero gradient on its own device.
  std::array<bool, 2> grads_on_device{};
};

// Splits Linear(256, h) -> ReLU -> Linear(h, h) -> ReLU | Linear(h, h) -> ReLU -> Linear(h, 10)
// (h = 256 size) across `first` and `second`, moving the activation between them with .to(),
// and measures both devices through one Adam training step on a batch of 64. When `capacity` is
// not 0 the two devices must be simulated ones (sim:N) and are first given that capacity
// (set_sim_capacity: fresh allocators).
ModelParallelResult measure_model_parallel(int64_t size, Device first, Device second,
                                           size_t capacity);

}  // namespace memgrad::examples
