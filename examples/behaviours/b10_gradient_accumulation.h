// B10: gradient accumulation and zero_grad. The measurement, for the program and its test.
#pragma once

#include <cstdint>

#include "engine/device.h"

namespace memgrad::examples {

struct AccumulationResult {
  int64_t batch = 0, micro_batches = 0, micro_batch = 0;
  int64_t grad_bytes = 0;  // every parameter's gradient, rounded (computed from the shapes)

  // Two backward calls on the same micro-batch, without zero_grad in between.
  bool doubled_exactly = false;       // every .grad equals twice the first backward's, bit for bit
  int64_t second_backward_bytes = 0;  // allocated after the second backward minus before it

  // One big batch vs micro_batches micro-batches of loss / micro_batches each. Bytes above the
  // parameters, their (already allocated) gradients and the data.
  int64_t kept_big = 0, kept_micro = 0;  // kept by one forward: saved activations and the loss
  int64_t expected_kept_big = 0, expected_kept_micro = 0;
  int64_t peak_big = 0, peak_micro = 0;  // the highest during forward + backward
  double max_abs_diff = 0;               // between the two runs' gradients
  bool allclose = false;                 // rtol 1e-5, atol 1e-6

  // zero_grad: allocated change of each kind.
  int64_t zero_grad_keep_bytes = 0;  // zero_grad(set_to_none = false)
  bool zeros_after_keep = false;     // ... left every gradient at exactly 0
  int64_t zero_grad_none_bytes = 0;  // zero_grad(set_to_none = true)
};

// An MLP 64 -> 256 -> 256 -> 16 (ReLU) with cross-entropy on a batch of 256 size random
// samples on `device`, split into `micro_batches` micro-batches.
AccumulationResult measure_accumulation(int64_t size, Device device, int64_t micro_batches = 4);

}  // namespace memgrad::examples
