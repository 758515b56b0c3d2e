// B14: float16 autocast with loss scaling. The measurement, for the program and its test.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

// What one forward (model + cross-entropy) keeps for backward, in allocator block bytes. The
// categories come from a saved-tensor pack hook that sees every tensor autograd saves (each
// storage counted once; tensors the caller already holds, parameters and data, are skipped).
struct ForwardKept {
  int64_t total = 0;          // allocated after the forward minus before (the loss included)
  int64_t hidden = 0;         // the ReLU outputs (saved by the ReLU and the next Linear)
  int64_t log_probs = 0;      // what the cross-entropy saves
  int64_t input_copy = 0;     // a float16 copy of the input (autocast only)
  int64_t weight_copies = 0;  // float16 copies of weights (autocast only)
  int64_t other = 0;          // anything else saved (expected: nothing)
  int64_t loss = 0;           // the 0-d loss
};

// The same numbers computed from the shapes before running.
struct ForwardKeptExpected {
  ForwardKept fp32, fp16;
};

// The totals alone at one batch size.
struct KeptAtBatch {
  int64_t batch = 0;
  int64_t fp32 = 0, fp16 = 0;                    // measured totals
  int64_t expected_fp32 = 0, expected_fp16 = 0;  // from the shapes
};

struct AutocastMemoryResult {
  int64_t batch = 0, in = 0, hidden = 0, classes = 0, layers = 0;
  ForwardKept fp32, fp16;
  ForwardKeptExpected expected;
  std::vector<KeptAtBatch> by_batch;  // batches 96, 384 and 1536 (x size)
};

// An MLP in -> hidden (x layers, ReLU) -> classes on a float32 (384 size) x 32 batch on
// `device`, one forward each without and with AutocastGuard (float16); then the totals for
// three batch sizes.
AutocastMemoryResult measure_autocast_memory(int64_t size, Device device);

// One GradScaler event: a step where the scale changed or the step was skipped.
struct ScalerEvent {
  int64_t step = 0;
  double scale_before = 0, scale_after = 0;
  bool stepped = true;
  bool injected = false;     // an inf was written into a gradient at this step
  bool weights_kept = true;  // for a skipped step: the weights did not change
};

struct MixedTrainingResult {
  int64_t steps = 0, growth_interval = 0, inject_step = 0;
  std::vector<double> losses32, losses16;  // per step
  std::vector<ScalerEvent> events;
  int64_t skipped = 0;
  double final32 = 0, final16 = 0;  // mean loss of the last 10 steps
  double ms32 = 0, ms16 = 0;        // wall-clock duration of each run
};

// Trains the same MLP from the same initial weights on a synthetic teacher-labelled task for
// `steps` Adam steps, in float32 and with autocast + GradScaler (growth_interval 10, an inf
// injected into a gradient at `inject_step`).
MixedTrainingResult train_mixed_precision(int64_t size, Device device, int64_t steps = 80,
                                          int64_t inject_step = 25);

}  // namespace memgrad::examples
