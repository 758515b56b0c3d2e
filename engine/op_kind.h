// Every op that autograd can differentiate (and autocast can cast), with the attribute struct
// (engine/op_attrs.h) it passes to the seam. The names are the ops' user-facing names; autograd
// names nodes after them ("mul" -> "MulBackward").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace memgrad {

enum class OpKind : uint16_t {
  // ---- elementwise (inputs: the tensors) ----
  Add,         // a + alpha b                           AlphaAttrs
  Sub,         // a - alpha b                           AlphaAttrs
  Mul,         // a b
  Div,         // a / b
  AddScalar,   // a + s                                 ScalarAttrs
  MulScalar,   // a s                                   ScalarAttrs
  DivScalar,   // a / s, or s / a                       ScalarAttrs
  RSubScalar,  // s - a                                 ScalarAttrs
  Neg,
  Pow,        // a ^ b (tensor exponent)
  PowScalar,  // a ^ s                                 ScalarAttrs
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Abs,
  Sign,
  Tanh,
  Sigmoid,
  Relu,
  Gelu,  //                                       GeluAttrs
  Silu,
  Reciprocal,
  Square,
  Clamp,  //                                       ClampAttrs
  Where,  // inputs: condition, a, b
  Maximum,
  Minimum,
  // ---- reductions ----
  Sum,     //                                       ReductionAttrs
  Mean,    //                                       ReductionAttrs
  Var,     //                                       VarianceAttrs
  Std,     //                                       VarianceAttrs
  MaxDim,  // outputs: values, indices              ArgReductionAttrs
  MinDim,  // outputs: values, indices              ArgReductionAttrs
  MaxAll,  // full reduction to a 0-d tensor
  MinAll,
  Amax,        //                                       ReductionAttrs
  Amin,        //                                       ReductionAttrs
  LogSumExp,   //                                       ReductionAttrs
  Norm,        //                                       NormAttrs
  Softmax,     //                                       SoftmaxAttrs
  LogSoftmax,  //                                       SoftmaxAttrs
  // ---- linear algebra ----
  Mm,
  Bmm,
  Matmul,
  Addmm,   // inputs: bias, a, b                    AddmmAttrs
  Linear,  // inputs: x, weight[, bias]
  // ---- indexing and joining ----
  IndexSelect,  // inputs: self, index                  IndexDimAttrs
  Gather,       // inputs: self, index                  IndexDimAttrs
  ScatterAdd,   // inputs: self, index, src             IndexDimAttrs
  Embedding,    // inputs: weight, indices
  MaskedFill,   // inputs: self, mask                   FillAttrs
  Cat,          // inputs: the tensors                  CatAttrs
  Pad,          //                                      PadAttrs
  // ---- copies and casts ----
  Clone,
  ToDtype,  // the input's dtype is on the node's input metadata
  ToDevice,
  Copy,  // in-place copy_: inputs self, src
  Fill,  // in-place fill_/zero_/uniform_/normal_ FillAttrs
  // ---- views ----
  View,  // view / reshape without a copy / flatten / unflatten
  Expand,
  Slice,      //                                      SliceAttrs
  Select,     //                                      SelectAttrs
  Transpose,  //                                      TransposeAttrs
  Permute,    //                                      PermuteAttrs
  Squeeze,
  Unsqueeze,
  AsStrided,  // the input's geometry is on the node  AsStridedAttrs
  Diagonal,   //                                      DiagonalAttrs
  Split,      // split, chunk (pieces as outputs)     SplitAttrs
  Unbind,     // unbind (pieces as outputs)           UnbindAttrs
  // ---- nn ----
  LayerNorm,     // inputs: x, weight, bias; outputs: y, mean, rstd     LayerNormAttrs
  CrossEntropy,  // inputs: logits, target, log_probs                   CrossEntropyAttrs
  MseLoss,       // composed of differentiable ops; listed for autocast only
  Dropout,       // inputs: x, mask                                     DropoutAttrs
  // New kinds go above Dropout, which stays last: kNumOpKinds counts up to it.
};

// How many OpKind values there are (the size of tables indexed by OpKind).
inline constexpr size_t kNumOpKinds = static_cast<size_t>(OpKind::Dropout) + 1;

// What ops that autograd never records pass instead of an OpKind: comparisons, logical ops,
// any/all. Their results are bool or integer and carry no gradient.
inline constexpr std::optional<OpKind> kNotDifferentiable = std::nullopt;

// The op's name as users call it: "add", "matmul", "softmax", ...
const char* op_name(OpKind kind);

}  // namespace memgrad
