// The backward runner: executes the graph from some outputs back to the leaves.
//
// Nodes run in dependency order with an explicit ready queue (no recursion, so deep graphs do
// not exhaust the stack); among ready nodes an AccumulateGrad runs first (a leaf's gradient is
// written, and its post-accumulate hooks run, as soon as it is complete), then the most recently
// created, as in PyTorch. Gradients arriving at the same node input are summed in a buffer that
// is freed as soon as the node has run, and each node's saved tensors are released right after
// it runs unless retain_graph, so activation memory falls progressively during backward.
#pragma once

#include <vector>

#include "engine/tensor.h"

namespace memgrad::autograd {

// Backpropagates from `outputs` with the given output gradients (an undefined entry means ones
// for a one-element output) and accumulates into the .grad of every reachable leaf that
// requires grad. Throws AutogradError for an output that needs no gradient, a missing gradient
// for a non-scalar output, a shape mismatch, or create_graph (higher-order gradients are not
// supported).
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs = {},
              bool retain_graph = false, bool create_graph = false);

// The gradients of `outputs` with respect to `inputs`, returned instead of accumulated into
// .grad (torch.autograd.grad). An input the outputs do not depend on gets an undefined tensor
// when allow_unused, else an AutogradError.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool allow_unused = false);

}  // namespace memgrad::autograd
