// Every op that autograd can differentiate (and autocast can cast), with the OpAttrs fields it
// passes. The names are the ops' user-facing names; autograd names nodes after them
// ("mul" -> "MulBackward").
#pragma once

#include <cstdint>

namespace memgrad {

enum class OpKind : uint16_t {
  // ---- elementwise (inputs: the tensors; scalar operand in attrs.alpha) ----
  Add,         // a + alpha b                           attrs: alpha
  Sub,         // a - alpha b                           attrs: alpha
  Mul,         // a b
  Div,         // a / b
  AddScalar,   // a + alpha                             attrs: alpha
  MulScalar,   // a alpha                               attrs: alpha
  DivScalar,   // a / alpha, or alpha / a if flag       attrs: alpha, flag
  RSubScalar,  // alpha - a                             attrs: alpha
  Neg,
  Pow,         // a ^ b (tensor exponent)
  PowScalar,   // a ^ alpha, or alpha ^ a if flag       attrs: alpha, flag
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Abs,
  Sign,
  Tanh,
  Sigmoid,
  Relu,
  Gelu,        // attrs: flag (tanh approximation)
  Silu,
  Reciprocal,
  Square,
  Clamp,       // attrs: alpha (min), beta (max), has_min, has_max
  Where,       // inputs: condition, a, b
  Maximum,
  Minimum,
  // ---- reductions (attrs: dims (wrapped), flag = keepdim, sizes = input sizes) ----
  Sum,
  Mean,
  Var,         // attrs: correction
  Std,         // attrs: correction
  MaxDim,      // outputs: values, indices; attrs: dim, flag
  MinDim,      // outputs: values, indices; attrs: dim, flag
  MaxAll,      // full reduction to a 0-d tensor
  MinAll,
  Amax,
  Amin,
  LogSumExp,
  Norm,        // attrs: alpha (p)
  Softmax,     // attrs: dim
  LogSoftmax,  // attrs: dim
  // ---- linear algebra ----
  Mm,
  Bmm,
  Matmul,
  Addmm,       // inputs: bias, a, b; attrs: beta, alpha
  Linear,      // inputs: x, weight[, bias]
  // ---- indexing and joining ----
  IndexSelect,  // inputs: self, index; attrs: dim
  Gather,       // inputs: self, index; attrs: dim
  ScatterAdd,   // inputs: self, index, src; attrs: dim
  Embedding,    // inputs: weight, indices
  MaskedFill,   // inputs: self, mask; attrs: alpha (value)
  Cat,          // inputs: the tensors; attrs: dim, split (sizes along dim)
  Pad,          // attrs: split (the padding, PyTorch order), alpha (value), sizes
  // ---- copies and casts ----
  Clone,
  ToDtype,      // attrs: nothing (the input's dtype is on the saved metadata)
  ToDevice,
  Copy,         // in-place copy_: inputs self, src
  Fill,         // in-place fill_/zero_: attrs: alpha
  // ---- views (attrs: sizes = input sizes unless stated) ----
  View,         // view / reshape without a copy / flatten / unflatten
  Expand,
  Slice,        // attrs: dim, start, step
  Select,       // attrs: dim, start (index)
  Transpose,    // attrs: dim, dim2
  Permute,      // attrs: dims
  Squeeze,
  Unsqueeze,
  AsStrided,    // attrs: sizes, strides, start (offset); the input's geometry is saved
  Diagonal,     // attrs: start (offset), dim, dim2
  Detach,       // no gradient flows
  // ---- nn (issue 5) ----
  LayerNorm,    // inputs: x, weight, bias; outputs: y, mean, rstd; attrs: dims (normalized)
  CrossEntropy, // inputs: logits, target, log_probs (saved); attrs: alpha (label smoothing),
                // start (ignore_index), beta (gradient scale: 1/count for a mean, else 1)
  MseLoss,      // attrs: flag (mean reduction)
  Dropout,      // inputs: x, mask; attrs: alpha (scale 1/(1-p))
  NumOpKinds,
};

// The op's name as users call it: "add", "matmul", "softmax", ...
const char* op_name(OpKind kind);

}  // namespace memgrad
