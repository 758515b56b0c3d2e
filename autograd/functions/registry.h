// The table from OpKind to what the op saves and its backward formula.
//
// Each op is one struct in the file of its family (functions/elementwise.cpp, reduce.cpp,
// linalg.cpp, indexing.cpp, views.cpp, copy.cpp, nn.cpp), read in one screen:
//
//   // mul: d(a b) = (g b, g a)
//   struct Mul {
//     static constexpr OpKind kind = OpKind::Mul;
//     static constexpr ReadsSelf reads_self = ReadsSelf::ForOtherGrads;
//     enum Saved { kA, kB };
//     static void save(OpNode& n, Inputs in, Outputs out);   // what backward reads, no more
//     static Grads backward(OpNode& n, const Grads& g);       // the formula
//   };
//
// and the family's register function lists its structs (register_op<Mul>()). `reads_self` (default
// Never) says when the formula reads input 0's value: an in-place form of the op must then copy
// self before overwriting it. `differentiable_outputs` (default: all) limits the outputs that
// get this node as history (layer_norm's mean and rstd are saved, not differentiated).
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <vector>

#include "autograd/node.h"

namespace memgrad::autograd {

using Inputs = std::span<const Tensor>;
using Outputs = std::span<const Tensor>;
using Grads = std::vector<Tensor>;

// When an op's formula reads input 0 (self): the copy an in-place version must make first
// (PyTorch saves original_self the same way).
enum class ReadsSelf {
  Never,          // the formula reads the result or other inputs only
  ForSelfGrad,    // when self needs a gradient (log, abs, pow with a scalar exponent, ...)
  ForOtherGrads,  // when another input needs one (mul, div: b's gradient reads a)
  Always,
};

struct OpEntry {
  void (*save)(OpNode& node, Inputs inputs, Outputs outputs) = nullptr;
  OpNode::Formula backward = nullptr;
  ReadsSelf reads_self = ReadsSelf::Never;
  uint32_t differentiable_outputs = 0;  // 0: every output
};

// The entry of `kind` (backward is null for an op that has no formula).
const OpEntry& op_entry(OpKind kind);

// Builds the node of `kind` over `inputs` and `outputs` (history set on the differentiable
// outputs) and saves what its formula reads. Throws AutogradError for an op without a formula.
std::shared_ptr<OpNode> record_op(OpKind kind, Inputs inputs, Outputs outputs,
                                  const OpAttrs& attrs);

template <class Op>
concept OpDefinition = requires(OpNode& n, Inputs in, Outputs out, const Grads& g) {
  { Op::kind } -> std::convertible_to<OpKind>;
  Op::save(n, in, out);
  { Op::backward(n, g) } -> std::same_as<Grads>;
};

void set_op_entry(OpKind kind, OpEntry entry);

// Registers the op struct `Op` (see the top of this file).
template <OpDefinition Op>
void register_op() {
  OpEntry entry{&Op::save, &Op::backward};
  if constexpr (requires { Op::reads_self; }) entry.reads_self = Op::reads_self;
  if constexpr (requires { Op::differentiable_outputs; }) {
    entry.differentiable_outputs = Op::differentiable_outputs;
  }
  set_op_entry(Op::kind, entry);
}

// Each family's registration, called once when the table is first used.
void register_elementwise_ops();
void register_copy_ops();
void register_view_ops();
void register_reduce_ops();
void register_linalg_ops();
void register_indexing_ops();
void register_nn_ops();

}  // namespace memgrad::autograd
