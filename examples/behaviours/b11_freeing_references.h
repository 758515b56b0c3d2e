// B11: dropping the last reference frees memory at once; what still pins it. The measurement,
// for the program and its test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

// One allocated reading, relative to the start of its part.
struct ReferenceStep {
  std::string what;
  int64_t expected = 0;
  int64_t measured = 0;
};

struct FreeingResult {
  int64_t tensor_bytes = 0;      // the tensor of part 1, rounded
  int64_t activation_bytes = 0;  // one activation of the model of parts 2-4, rounded
  int64_t graph_bytes = 0;       // what one step's graph keeps: 2 activations and the loss
  // 1. Handles: reset, scope exit, a view that outlives its base.
  std::vector<ReferenceStep> handles;
  int64_t reserved_change_on_reset = 0;  // the freed block stays cached: 0
  // 2. A graph kept alive by its loss after the output handle is gone.
  std::vector<ReferenceStep> graph;
  // 3. Evaluation steps in grad mode (no backward): losses kept as tensors vs as numbers.
  std::vector<ReferenceStep> eval_tensors, eval_items;
  // 4. Training steps (backward each step): the same two ways.
  std::vector<ReferenceStep> train_tensors, train_items;
};

// Part 1 uses a float32 (256 size) x 1024 tensor; parts 2-4 a Linear(256, 256) + ReLU + Linear +
// ReLU model on a (64 size) x 256 batch, `steps` steps each. Everything on `device`.
FreeingResult measure_freeing(int64_t size, Device device, int64_t steps = 4);

}  // namespace memgrad::examples
