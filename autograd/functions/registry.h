// The table from OpKind to its recorder (what to save) and backward formula.
//
// Each op family registers its ops in its own file (functions/elementwise.cpp, reduce.cpp,
// linalg.cpp, indexing.cpp, views.cpp, copy.cpp, loss.cpp). A recorder creates the node with
// make_op_node() and saves exactly what its formula reads.
#pragma once

#include <span>

#include "autograd/node.h"

namespace memgrad::autograd {

using Recorder = void (*)(std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                          const OpAttrs& attrs);

struct OpEntry {
  Recorder record = nullptr;
  OpNode::Formula formula = nullptr;
  // Whether the formula reads input 0's value when self's gradient is needed, and when another
  // input's gradient is needed. An in-place version of the op must then copy self before
  // overwriting it (PyTorch saves original_self the same way).
  bool reads_self_for_self = false;
  bool reads_self_for_others = false;
};

// The entry of `kind` (record is null for an op that is not differentiable yet).
const OpEntry& op_entry(OpKind kind);
OpNode::Formula formula_for(OpKind kind);

// Registration, called once by the table's initialiser.
void set_op_entry(OpKind kind, OpEntry entry);
void register_elementwise_ops();
void register_copy_ops();
void register_view_ops();
void register_reduce_ops();
void register_linalg_ops();
void register_indexing_ops();
void register_nn_ops();

}  // namespace memgrad::autograd
