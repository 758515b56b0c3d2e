// Op names for messages, traces and autograd node names.
#include "engine/op_kind.h"

namespace memgrad {

const char* op_name(OpKind kind) {
  switch (kind) {
    case OpKind::Add: return "add";
    case OpKind::Sub: return "sub";
    case OpKind::Mul: return "mul";
    case OpKind::Div: return "div";
    case OpKind::AddScalar: return "add";
    case OpKind::MulScalar: return "mul";
    case OpKind::DivScalar: return "div";
    case OpKind::RSubScalar: return "rsub";
    case OpKind::Neg: return "neg";
    case OpKind::Pow: return "pow";
    case OpKind::PowScalar: return "pow";
    case OpKind::Exp: return "exp";
    case OpKind::Log: return "log";
    case OpKind::Sqrt: return "sqrt";
    case OpKind::Rsqrt: return "rsqrt";
    case OpKind::Abs: return "abs";
    case OpKind::Sign: return "sign";
    case OpKind::Tanh: return "tanh";
    case OpKind::Sigmoid: return "sigmoid";
    case OpKind::Relu: return "relu";
    case OpKind::Gelu: return "gelu";
    case OpKind::Silu: return "silu";
    case OpKind::Reciprocal: return "reciprocal";
    case OpKind::Square: return "square";
    case OpKind::Clamp: return "clamp";
    case OpKind::Where: return "where";
    case OpKind::Maximum: return "maximum";
    case OpKind::Minimum: return "minimum";
    case OpKind::Sum: return "sum";
    case OpKind::Mean: return "mean";
    case OpKind::Var: return "var";
    case OpKind::Std: return "std";
    case OpKind::MaxDim: return "max";
    case OpKind::MinDim: return "min";
    case OpKind::MaxAll: return "max";
    case OpKind::MinAll: return "min";
    case OpKind::Amax: return "amax";
    case OpKind::Amin: return "amin";
    case OpKind::LogSumExp: return "logsumexp";
    case OpKind::Norm: return "norm";
    case OpKind::Softmax: return "softmax";
    case OpKind::LogSoftmax: return "log_softmax";
    case OpKind::Mm: return "mm";
    case OpKind::Bmm: return "bmm";
    case OpKind::Matmul: return "matmul";
    case OpKind::Addmm: return "addmm";
    case OpKind::Linear: return "linear";
    case OpKind::IndexSelect: return "index_select";
    case OpKind::Gather: return "gather";
    case OpKind::ScatterAdd: return "scatter_add";
    case OpKind::Embedding: return "embedding";
    case OpKind::MaskedFill: return "masked_fill";
    case OpKind::Cat: return "cat";
    case OpKind::Pad: return "pad";
    case OpKind::Clone: return "clone";
    case OpKind::ToDtype: return "to";
    case OpKind::ToDevice: return "to";
    case OpKind::Copy: return "copy_";
    case OpKind::Fill: return "fill_";
    case OpKind::View: return "view";
    case OpKind::Expand: return "expand";
    case OpKind::Slice: return "slice";
    case OpKind::Select: return "select";
    case OpKind::Transpose: return "transpose";
    case OpKind::Permute: return "permute";
    case OpKind::Squeeze: return "squeeze";
    case OpKind::Unsqueeze: return "unsqueeze";
    case OpKind::AsStrided: return "as_strided";
    case OpKind::Diagonal: return "diagonal";
    case OpKind::Split: return "split";
    case OpKind::Unbind: return "unbind";
    case OpKind::LayerNorm: return "layer_norm";
    case OpKind::CrossEntropy: return "cross_entropy";
    case OpKind::MseLoss: return "mse_loss";
    case OpKind::Dropout: return "dropout";
  }
  return "unknown";
}

}  // namespace memgrad
