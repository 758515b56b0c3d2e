// Building the graph: a tensor's gradient edge, attaching history to op outputs, and the node
// factory every recorder uses.
#pragma once

#include <memory>
#include <span>

#include "autograd/node.h"

namespace memgrad::autograd {

// The tensor's AutogradMeta, created on first use.
AutogradMeta& meta_of(const Tensor& t);

// Where t's gradient must go: its grad_fn (rebuilt first if t is a view whose base changed in
// place since), its leaf AccumulateGrad (created on first use), or nowhere.
Edge gradient_edge(const Tensor& t);

// A handle on t's storage and layout (t.detach()) carrying the history `edge`: grad_fn edge.fn
// as output edge.input_nr, or none for an empty edge.
Tensor alias_with_history(const Tensor& t, const Edge& edge);

// Makes `fn` the producer of `t` as output `output_nr`.
void set_history(const Tensor& t, uint32_t output_nr, const std::shared_ptr<Node>& fn);

// A node for `kind` with an edge per input and history set on every floating output.
std::shared_ptr<OpNode> make_op_node(OpKind kind, OpNode::Formula formula,
                                     std::span<const Tensor> inputs,
                                     std::span<const Tensor> outputs, const OpAttrs& attrs);

// The root tensor a view aliases (itself for a non-view), as a Tensor handle.
Tensor view_base_of(const Tensor& t);

}  // namespace memgrad::autograd
