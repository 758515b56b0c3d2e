// Backward kernels as engine ops: allocate the gradient, run the backend's fused kernel.
#include "engine/backward_ops.h"

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/factories.h"
#include "engine/op_support.h"

namespace memgrad {
namespace {

using detail::kernels_for;
using detail::new_tensor;
using detail::operand;
using kernels::UnaryOp;

UnaryOp unary_op_of(OpKind kind, const GeluAttrs& gelu) {
  switch (kind) {
    case OpKind::Exp: return UnaryOp::Exp;
    case OpKind::Log: return UnaryOp::Log;
    case OpKind::Sqrt: return UnaryOp::Sqrt;
    case OpKind::Rsqrt: return UnaryOp::Rsqrt;
    case OpKind::Abs: return UnaryOp::Abs;
    case OpKind::Tanh: return UnaryOp::Tanh;
    case OpKind::Sigmoid: return UnaryOp::Sigmoid;
    case OpKind::Relu: return UnaryOp::Relu;
    case OpKind::Gelu: return gelu.tanh_approximation ? UnaryOp::GeluTanh : UnaryOp::GeluErf;
    case OpKind::Silu: return UnaryOp::Silu;
    case OpKind::Reciprocal: return UnaryOp::Reciprocal;
    case OpKind::Square: return UnaryOp::Square;
    default:
      throw ValueError(
          fmt::format("[unary_backward] {} is not a unary op with a fused backward", op_name(kind)),
          "unary_backward", "kind", std::string(op_name(kind)));
  }
}

kernels::Operand optional_operand(const Tensor& t) {
  return t.defined() ? operand(t) : kernels::Operand{};
}

}  // namespace

Tensor unary_backward(OpKind kind, const Tensor& grad, const Tensor& saved, const GeluAttrs& gelu) {
  const UnaryOp op = unary_op_of(kind, gelu);
  Tensor grad_in = new_tensor(grad.sizes(), grad.dtype(), grad.device());
  kernels_for(grad.device())
      .unary_backward(op, operand(grad_in), operand(grad), operand(saved, grad.sizes()));
  return grad_in;
}

Tensor pow_scalar_backward(const Tensor& grad, const Tensor& x, double exponent) {
  Tensor grad_in = new_tensor(grad.sizes(), grad.dtype(), grad.device());
  kernels_for(x.device())
      .pow_scalar_backward(operand(grad_in), operand(grad), operand(x), exponent);
  return grad_in;
}

Tensor clamp_backward(const Tensor& grad, const Tensor& x, const ClampAttrs& bounds) {
  Tensor grad_in = new_tensor(grad.sizes(), grad.dtype(), grad.device());
  kernels_for(x.device())
      .clamp_backward(operand(grad_in), operand(grad), operand(x), bounds.min.value_or(0.0),
                      bounds.max.value_or(0.0), bounds.min.has_value(), bounds.max.has_value());
  return grad_in;
}

Tensor softmax_backward(const Tensor& grad, const Tensor& result, int64_t dim, bool log) {
  const Tensor g = grad.contiguous();
  Tensor grad_in = new_tensor(result.sizes(), result.dtype(), result.device());
  const int d = wrap_dim(dim, result.dim(), log ? "log_softmax" : "softmax");
  kernels_for(result.device())
      .softmax_backward(operand(grad_in), operand(g), operand(result), d, log);
  return grad_in;
}

Tensor index_add_into_zeros(const Shape& input_sizes, DType dtype, Device device, int64_t dim,
                            const Tensor& index, const Tensor& src) {
  Tensor out = zeros(input_sizes, TensorOptions(dtype).with_device(device));
  const int d = wrap_dim(dim, input_sizes.size(), "index_add");
  kernels_for(device).index_add(operand(out), operand(index), operand(src.contiguous()), d);
  return out;
}

LayerNormGrads layer_norm_backward(const Tensor& dy_in, const Tensor& x, const Tensor& mean,
                                   const Tensor& rstd, const Tensor& weight,
                                   const Shape& normalized_shape, const Shape& weight_sizes,
                                   const bool (&needs)[3]) {
  const Tensor dy = dy_in.contiguous();
  const int64_t cols = numel_of(normalized_shape);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  LayerNormGrads grads;
  if (needs[0]) grads.x = new_tensor(x.sizes(), x.dtype(), x.device());
  if (needs[1]) grads.weight = new_tensor(weight_sizes, x.dtype(), x.device());
  if (needs[2]) grads.bias = new_tensor(weight_sizes, x.dtype(), x.device());
  kernels_for(x.device())
      .layer_norm_backward(optional_operand(grads.x), optional_operand(grads.weight),
                           optional_operand(grads.bias), operand(dy), operand(x), operand(mean),
                           operand(rstd), optional_operand(weight), rows, cols);
  return grads;
}

Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& log_probs,
                              const Tensor& target, const CrossEntropyAttrs& attrs) {
  Tensor grad = new_tensor(log_probs.sizes(), log_probs.dtype(), log_probs.device());
  const Tensor g = grad_loss.to(log_probs.dtype()).contiguous();
  kernels_for(log_probs.device())
      .cross_entropy_backward(operand(grad), operand(g), operand(log_probs), operand(target),
                              attrs.ignore_index, attrs.label_smoothing, attrs.grad_scale);
  return grad;
}

}  // namespace memgrad
