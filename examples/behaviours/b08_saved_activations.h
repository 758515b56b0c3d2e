// B8: autograd keeps activations from forward to backward. The measurement, for the program and
// its test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

// One reading of the device's allocated bytes, above the baseline (parameters and input).
struct ActivationStep {
  std::string what;
  int64_t expected = 0;
  int64_t measured = 0;
};

struct SavedActivationsResult {
  int64_t layers = 0, batch = 0, width = 0;
  int64_t activation_bytes = 0;  // one (batch, width) float32 activation, rounded
  int64_t grad_bytes = 0;        // every layer's weight and bias gradient, rounded
  // After each Linear and each ReLU of the forward, then after the loss.
  std::vector<ActivationStep> forward;
  // During backward, when the gradient of hidden activation i arrives (a tensor hook), i from
  // layers - 1 down to 1: the activations of the layers above are gone already.
  std::vector<ActivationStep> backward;
  ActivationStep after_backward;  // the output and the loss are still held by the caller
  // A fresh forward, backward(retain_graph = true), then a second backward without it.
  ActivationStep retained;
  ActivationStep after_second_backward;
  bool second_backward_ran = false;
  std::string third_backward_error;  // what the third backward threw ("" if it did not)
};

// Runs `layers` Linear(256, 256) + ReLU layers on a float32 (64 size) x 256 batch on `device`
// with loss = output.sum(), reading the allocated bytes through forward and backward.
SavedActivationsResult measure_saved_activations(int64_t size, Device device, int64_t layers = 6);

}  // namespace memgrad::examples
