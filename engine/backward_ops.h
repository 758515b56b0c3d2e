// The fused kernels of backward formulas, as engine ops (ATen has the same family:
// threshold_backward, gelu_backward, _softmax_backward_data, native_layer_norm_backward, ...).
//
// This header is the second half of the seam with autograd/ (autograd_seam.h is the first):
// autograd's formulas compute every gradient either with public ops (mul, sum, matmul, ...) or
// with one of these, and never reach into the engine's internals. Each runs one kernel over the
// incoming gradient and what the forward saved, and none is recorded: backward runs with grad
// mode off (memgrad has no higher-order gradients; create_graph is refused).
//
// Memory contract for the whole family:
//   Allocates: the gradient(s) returned, each of the input's shape and dtype (contiguous).
//   Aliases: nothing. Version: nothing is written in place. Saves for backward: nothing.
#pragma once

#include <optional>

#include "engine/op_attrs.h"
#include "engine/op_kind.h"
#include "engine/tensor.h"

namespace memgrad {

// grad * f'(x) of a unary op, from `saved`: the op's result for exp, tanh, sigmoid, relu, sqrt,
// rsqrt and reciprocal, its input for log, abs, gelu, silu and square (what each op saves,
// elementwise.h; sign saves nothing, its gradient being zero). `saved` broadcasts to grad's
// shape. Throws ValueError for another kind.
Tensor unary_backward(OpKind kind, const Tensor& grad, const Tensor& saved,
                      const GeluAttrs& gelu = {});

// grad * e x^(e-1): the gradient of x ^ e with a scalar exponent.
Tensor pow_scalar_backward(const Tensor& grad, const Tensor& x, double exponent);

// grad where min <= x <= max, else 0 (either bound may be absent).
Tensor clamp_backward(const Tensor& grad, const Tensor& x, const ClampAttrs& bounds);

// The gradient of softmax (log: log_softmax) along `dim` from its saved result.
Tensor softmax_backward(const Tensor& grad, const Tensor& result, int64_t dim, bool log);

// zeros(input_sizes) with the rows of `src` added at `index` along `dim` (duplicates
// accumulate): the gradient of index_select and embedding. `index` is int64 and 1-d.
Tensor index_add_into_zeros(const Shape& input_sizes, DType dtype, Device device, int64_t dim,
                            const Tensor& index, const Tensor& src);

// The gradients of layer_norm's input, weight and bias in one pass, from dy and the forward's
// saved x, mean, rstd and weight (undefined when the layer had none). A gradient is computed
// only where `needs[i]`; the others come back undefined.
struct LayerNormGrads {
  Tensor x;
  Tensor weight;
  Tensor bias;
};
LayerNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                   const Tensor& rstd, const Tensor& weight,
                                   const Shape& normalized_shape, const Shape& weight_sizes,
                                   const bool (&needs)[3]);

// The gradient of cross_entropy with respect to the logits: grad_scale g (softmax - smoothed
// one-hot target), 0 on ignored rows, from the saved log-probabilities. `grad_loss` has one
// element per row, or one for all.
Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& log_probs,
                              const Tensor& target, const CrossEntropyAttrs& attrs);

}  // namespace memgrad
