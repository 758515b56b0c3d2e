// Helpers shared by the backward formulas.
#pragma once

#include "autograd/node.h"
#include "engine/memgrad.h"

namespace memgrad::autograd {

// Sums `grad` down to `sizes` (undoing broadcasting). Returns grad itself when the shapes
// already match. Allocates: the reduced gradient.
Tensor sum_to(const Tensor& grad, const Shape& sizes);

// Zeros of an input's shape, dtype and device.
Tensor zeros_for(const TensorMeta& meta);

// The gradient of output `i`, or zeros of its shape when undefined.
Tensor grad_or_zeros(OpNode& node, const std::vector<Tensor>& grads, size_t i);

// Records `kind` with `formula`: a node over inputs/outputs (no saved tensors).
std::shared_ptr<OpNode> node_for(OpKind kind, std::span<const Tensor> inputs,
                                 std::span<const Tensor> outputs, const OpAttrs& attrs);

}  // namespace memgrad::autograd
