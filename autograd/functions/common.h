// Helpers shared by the backward formulas.
#pragma once

#include "autograd/functions/registry.h"
#include "engine/backward_ops.h"
#include "engine/memgrad.h"

namespace memgrad::autograd {

// Sums `grad` down to `sizes` (undoing broadcasting). Returns grad itself when the shapes
// already match. Allocates: the reduced gradient.
Tensor sum_to(const Tensor& grad, const Shape& sizes);

// Zeros of an input's shape, dtype and device.
Tensor zeros_for(const TensorMeta& meta);

}  // namespace memgrad::autograd
