// What an op tells autograd besides its tensors: one attribute struct per op family, each field
// named for what it is.
//
// A front-end op passes exactly one of these to the seam with its tensors (OpAttrs is the
// variant of them); the backward formula reads it back by type (`node.attrs<ClampAttrs>()`).
// op_kind.h says which struct each OpKind carries. Ops whose backward needs nothing beyond the
// tensors' sizes and dtypes (the input metadata every node keeps) pass NoAttrs.
#pragma once

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "engine/shape.h"

namespace memgrad {

// Nothing beyond the tensors: mul, div, exp, mm, view, clone, ...
struct NoAttrs {};

// add / sub of two tensors: a + alpha b, a - alpha b.
struct AlphaAttrs {
  double alpha = 1.0;
};

// A tensor with a scalar operand: x + s, x s, x / s (or s / x), s - x, x ^ s.
struct ScalarAttrs {
  double scalar = 0.0;
  bool scalar_first = false;  // the scalar is the left operand: s / x, s - x
};

// gelu: exact (erf) or the tanh approximation.
struct GeluAttrs {
  bool tanh_approximation = false;
};

// clamp: each bound is optional (at least one is given).
struct ClampAttrs {
  std::optional<double> min;
  std::optional<double> max;
};

// sum, mean, logsumexp, amax/amin over `dims` (empty: every dimension), wrapped to >= 0.
struct ReductionAttrs {
  Shape dims;
  bool keepdim = false;
};

// var / std: a reduction dividing by N - correction.
struct VarianceAttrs {
  ReductionAttrs reduction;
  int64_t correction = 1;
};

// norm: the p-norm over a reduction's dims (p may be infinity).
struct NormAttrs {
  ReductionAttrs reduction;
  double p = 2.0;
};

// max / min along one dimension (values and indices), wrapped to >= 0.
struct ArgReductionAttrs {
  int64_t dim = 0;
  bool keepdim = false;
};

// softmax / log_softmax along `dim` (as the user gave it: wrapped by the formula).
struct SoftmaxAttrs {
  int64_t dim = 0;
};

// index_select, gather, scatter_add along `dim` (wrapped to >= 0).
struct IndexDimAttrs {
  int64_t dim = 0;
};

// addmm(bias, a, b) = beta bias + alpha a @ b.
struct AddmmAttrs {
  double beta = 1.0;
  double alpha = 1.0;
};

// fill_, masked_fill: the value written.
struct FillAttrs {
  double value = 0.0;
};

// cat: the dimension joined along and each input's size along it.
struct CatAttrs {
  int64_t dim = 0;
  std::vector<int64_t> sizes_along_dim;
};

// pad: the padding in PyTorch's order (last dimension first, (before, after) pairs; negative
// values crop) and the value written into new elements.
struct PadAttrs {
  std::vector<int64_t> padding;
  double value = 0.0;
};

// slice (x[start:end:step] along `dim`), all wrapped and clamped.
struct SliceAttrs {
  int64_t dim = 0;
  int64_t start = 0;
  int64_t step = 1;
};

// select (x.select(dim, index)), wrapped.
struct SelectAttrs {
  int64_t dim = 0;
  int64_t index = 0;
};

// transpose of two dimensions, wrapped.
struct TransposeAttrs {
  int64_t dim0 = 0;
  int64_t dim1 = 1;
};

// permute: the permutation, wrapped.
struct PermuteAttrs {
  Shape dims;
};

// as_strided: the view's geometry in the storage (strides and offset in elements).
struct AsStridedAttrs {
  Shape sizes;
  Shape strides;
  int64_t storage_offset = 0;
};

// diagonal(offset, dim1, dim2), dimensions wrapped.
struct DiagonalAttrs {
  int64_t offset = 0;
  int64_t dim1 = 0;
  int64_t dim2 = 1;
};

// split and chunk: the pieces' lengths along `dim` (wrapped), in order.
struct SplitAttrs {
  int64_t dim = 0;
  std::vector<int64_t> lengths;
};

// unbind along `dim` (wrapped).
struct UnbindAttrs {
  int64_t dim = 0;
};

// layer_norm over the trailing `normalized_shape`.
struct LayerNormAttrs {
  Shape normalized_shape;
};

// cross_entropy (fused with log_softmax).
struct CrossEntropyAttrs {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  double grad_scale = 1.0;  // 1 / (rows counted) for a mean reduction, else 1
};

// dropout: the scale 1 / (1 - p) applied to kept elements.
struct DropoutAttrs {
  double scale = 1.0;
};

using OpAttrs =
    std::variant<NoAttrs, AlphaAttrs, ScalarAttrs, GeluAttrs, ClampAttrs, ReductionAttrs,
                 VarianceAttrs, NormAttrs, ArgReductionAttrs, SoftmaxAttrs, IndexDimAttrs,
                 AddmmAttrs, FillAttrs, CatAttrs, PadAttrs, SliceAttrs, SelectAttrs, TransposeAttrs,
                 PermuteAttrs, AsStridedAttrs, DiagonalAttrs, SplitAttrs, UnbindAttrs,
                 LayerNormAttrs, CrossEntropyAttrs, DropoutAttrs>;

}  // namespace memgrad
