// Elementwise ops: what each saves and its backward formula, side by side.
//
// Saved, as PyTorch's derivatives.yaml: add/sub/neg/scalar ops nothing; mul and div the inputs
// the other side's gradient needs; exp, tanh, sigmoid, relu, sqrt, rsqrt, reciprocal their
// output; log, abs, sign, gelu, silu, square, pow, clamp their input. Unary backward rules run
// as one fused kernel (grad_in = grad_out * f'(saved)), so backward allocates only the gradient.
#include <cmath>

#include "autograd/functions/common.h"
#include "autograd/functions/registry.h"
#include "engine/op_support.h"

namespace memgrad::autograd {
namespace {

using kernels::UnaryOp;
using Grads = std::vector<Tensor>;

UnaryOp unary_op_of(OpKind kind, const OpAttrs& attrs) {
  switch (kind) {
    case OpKind::Neg: return UnaryOp::Neg;
    case OpKind::Exp: return UnaryOp::Exp;
    case OpKind::Log: return UnaryOp::Log;
    case OpKind::Sqrt: return UnaryOp::Sqrt;
    case OpKind::Rsqrt: return UnaryOp::Rsqrt;
    case OpKind::Abs: return UnaryOp::Abs;
    case OpKind::Sign: return UnaryOp::Sign;
    case OpKind::Tanh: return UnaryOp::Tanh;
    case OpKind::Sigmoid: return UnaryOp::Sigmoid;
    case OpKind::Relu: return UnaryOp::Relu;
    case OpKind::Gelu: return attrs.flag ? UnaryOp::GeluTanh : UnaryOp::GeluErf;
    case OpKind::Silu: return UnaryOp::Silu;
    case OpKind::Reciprocal: return UnaryOp::Reciprocal;
    case OpKind::Square: return UnaryOp::Square;
    default: return UnaryOp::Neg;
  }
}

// grad_in = grad_out * f'(saved) in one kernel. Allocates: the gradient only.
Tensor fused_unary_backward(UnaryOp op, const Tensor& g, const Tensor& saved) {
  Tensor grad_in = detail::new_tensor(g.sizes(), g.dtype(), g.device());
  detail::kernels_for(g.device())
      .unary_backward(op, detail::operand(grad_in), detail::operand(g),
                      detail::operand(saved, g.sizes()));
  return grad_in;
}

// ---- recorders ----

template <OpKind K>
void record_nothing(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  node_for(K, in, out, a);
}

template <OpKind K>
void record_output(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  node_for(K, in, out, a)->save(out[0], /*is_output=*/true);
}

template <OpKind K>
void record_input(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  node_for(K, in, out, a)->save(in[0]);
}

// mul: each input is saved only if the other input needs a gradient.
void record_mul(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  auto n = node_for(OpKind::Mul, in, out, a);
  n->save(n->needs_grad(1) ? in[0] : Tensor());
  n->save(n->needs_grad(0) ? in[1] : Tensor());
}

// div: b is needed by both gradients; a only by b's.
void record_div(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  auto n = node_for(OpKind::Div, in, out, a);
  n->save(n->needs_grad(1) ? in[0] : Tensor());
  n->save(in[1]);
}

void record_div_scalar(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  auto n = node_for(OpKind::DivScalar, in, out, a);
  if (a.flag) n->save(in[0]);  // alpha / x needs x
}

void record_pow_scalar(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  auto n = node_for(OpKind::PowScalar, in, out, a);
  if (a.flag) {
    n->save(out[0], /*is_output=*/true);  // alpha^x: the gradient is result * log(alpha)
  } else {
    n->save(in[0]);
  }
}

template <OpKind K>
void record_both(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  auto n = node_for(K, in, out, a);
  n->save(in[0]);
  n->save(in[1]);
}

void record_where(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  node_for(OpKind::Where, in, out, a)->save(in[0]);  // the condition
}

// ---- formulas ----

// d(a + alpha b) = (g, alpha g); d(a - alpha b) = (g, -alpha g)
template <int kSign>
Grads add_sub_backward(OpNode& n, const Grads& g) {
  Tensor ga, gb;
  if (n.needs_grad(0)) ga = sum_to(g[0], n.input(0).sizes);
  if (n.needs_grad(1)) {
    const double scale = kSign * n.attrs().alpha;
    gb = sum_to(scale == 1.0 ? g[0] : g[0] * scale, n.input(1).sizes);
  }
  return {ga, gb};
}

// d(a b) = (g b, g a)
Grads mul_backward(OpNode& n, const Grads& g) {
  Tensor ga, gb;
  if (n.needs_grad(0)) ga = sum_to(g[0] * n.unpack(1), n.input(0).sizes);
  if (n.needs_grad(1)) gb = sum_to(g[0] * n.unpack(0), n.input(1).sizes);
  return {ga, gb};
}

// d(a / b) = (g / b, -g a / b^2)
Grads div_backward(OpNode& n, const Grads& g) {
  const Tensor b = n.unpack(1);
  Tensor ga, gb;
  if (n.needs_grad(0)) ga = sum_to(g[0] / b, n.input(0).sizes);
  if (n.needs_grad(1)) gb = sum_to(-g[0] * n.unpack(0) / (b * b), n.input(1).sizes);
  return {ga, gb};
}

// d(x + alpha) = g
Grads identity_backward(OpNode&, const Grads& g) { return {g[0]}; }

// d(-x) = -g; d(alpha - x) = -g
Grads negate_backward(OpNode&, const Grads& g) { return {-g[0]}; }

// d(x alpha) = g alpha
Grads mul_scalar_backward(OpNode& n, const Grads& g) { return {g[0] * n.attrs().alpha}; }

// d(x / alpha) = g / alpha; d(alpha / x) = -g alpha / x^2
Grads div_scalar_backward(OpNode& n, const Grads& g) {
  if (!n.attrs().flag) return {g[0] / n.attrs().alpha};
  const Tensor x = n.unpack(0);
  return {-g[0] * n.attrs().alpha / (x * x)};
}

// d(x^e) = g e x^(e-1); d(alpha^x) = g alpha^x log(alpha)
Grads pow_scalar_backward(OpNode& n, const Grads& g) {
  if (n.attrs().flag) return {g[0] * n.unpack(0) * std::log(n.attrs().alpha)};
  const Tensor x = n.unpack(0);
  Tensor grad_in = detail::new_tensor(g[0].sizes(), g[0].dtype(), g[0].device());
  detail::kernels_for(x.device())
      .pow_scalar_backward(detail::operand(grad_in), detail::operand(g[0]), detail::operand(x),
                           n.attrs().alpha);
  return {grad_in};
}

// d(a^b) = (g b a^(b-1), g a^b log a), with 0 where a == 0 in the second term (PyTorch)
Grads pow_backward(OpNode& n, const Grads& g) {
  const Tensor a = n.unpack(0), b = n.unpack(1);
  Tensor ga, gb;
  if (n.needs_grad(0)) ga = sum_to(g[0] * b * pow(a, b - 1.0), n.input(0).sizes);
  if (n.needs_grad(1)) {
    const Tensor term = pow(a, b) * log(a);
    gb = sum_to(g[0] * where(a.eq(0.0), zeros_like(term), term), n.input(1).sizes);
  }
  return {ga, gb};
}

// Unary ops: grad_in = g f'(saved), fused.
Grads unary_backward(OpNode& n, const Grads& g) {
  return {fused_unary_backward(unary_op_of(n.kind(), n.attrs()), g[0], n.unpack(0))};
}

// d clamp(x) = g where min <= x <= max
Grads clamp_backward(OpNode& n, const Grads& g) {
  const Tensor x = n.unpack(0);
  Tensor grad_in = detail::new_tensor(g[0].sizes(), g[0].dtype(), g[0].device());
  const OpAttrs& a = n.attrs();
  detail::kernels_for(x.device())
      .clamp_backward(detail::operand(grad_in), detail::operand(g[0]), detail::operand(x),
                      a.alpha, a.beta, a.has_min, a.has_max);
  return {grad_in};
}

// d where(c, a, b) = (-, g where c, g where not c)
Grads where_backward(OpNode& n, const Grads& g) {
  const Tensor c = n.unpack(0);
  const Tensor zero = zeros({}, TensorOptions(g[0].dtype()).with_device(g[0].device()));
  Tensor ga, gb;
  if (n.needs_grad(1)) ga = sum_to(where(c, g[0], zero), n.input(1).sizes);
  if (n.needs_grad(2)) gb = sum_to(where(c, zero, g[0]), n.input(2).sizes);
  return {Tensor(), ga, gb};
}

// maximum/minimum: the gradient goes to the selected input, split in half on ties (PyTorch).
template <bool kMax>
Grads extremum_backward(OpNode& n, const Grads& g) {
  const Tensor a = n.unpack(0), b = n.unpack(1);
  const Tensor wins = (kMax ? a.gt(b) : a.lt(b)).to(g[0].dtype()) + a.eq(b).to(g[0].dtype()) * 0.5;
  Tensor ga, gb;
  if (n.needs_grad(0)) ga = sum_to(g[0] * wins, n.input(0).sizes);
  if (n.needs_grad(1)) gb = sum_to(g[0] * (1.0 - wins), n.input(1).sizes);
  return {ga, gb};
}

// How a formula reads input 0 (self), for the copy an in-place version must make.
enum class Reads { Nothing, ForSelf, ForOthers, Always };

void set(OpKind kind, Recorder record, OpNode::Formula formula, Reads reads) {
  set_op_entry(kind, OpEntry{record, formula, reads == Reads::ForSelf || reads == Reads::Always,
                             reads == Reads::ForOthers || reads == Reads::Always});
}

}  // namespace

void register_elementwise_ops() {
  set(OpKind::Add, record_nothing<OpKind::Add>, add_sub_backward<1>, Reads::Nothing);
  set(OpKind::Sub, record_nothing<OpKind::Sub>, add_sub_backward<-1>, Reads::Nothing);
  set(OpKind::Mul, record_mul, mul_backward, Reads::ForOthers);
  set(OpKind::Div, record_div, div_backward, Reads::ForOthers);
  set(OpKind::AddScalar, record_nothing<OpKind::AddScalar>, identity_backward, Reads::Nothing);
  set(OpKind::MulScalar, record_nothing<OpKind::MulScalar>, mul_scalar_backward, Reads::Nothing);
  set(OpKind::DivScalar, record_div_scalar, div_scalar_backward, Reads::Nothing);
  set(OpKind::RSubScalar, record_nothing<OpKind::RSubScalar>, negate_backward, Reads::Nothing);
  set(OpKind::Neg, record_nothing<OpKind::Neg>, negate_backward, Reads::Nothing);
  set(OpKind::Pow, record_both<OpKind::Pow>, pow_backward, Reads::Always);
  set(OpKind::PowScalar, record_pow_scalar, pow_scalar_backward, Reads::ForSelf);
  // Output-saving ops: their in-place forms need no copy of self.
  set(OpKind::Exp, record_output<OpKind::Exp>, unary_backward, Reads::Nothing);
  set(OpKind::Tanh, record_output<OpKind::Tanh>, unary_backward, Reads::Nothing);
  set(OpKind::Sigmoid, record_output<OpKind::Sigmoid>, unary_backward, Reads::Nothing);
  set(OpKind::Relu, record_output<OpKind::Relu>, unary_backward, Reads::Nothing);
  set(OpKind::Sqrt, record_output<OpKind::Sqrt>, unary_backward, Reads::Nothing);
  set(OpKind::Rsqrt, record_output<OpKind::Rsqrt>, unary_backward, Reads::Nothing);
  set(OpKind::Reciprocal, record_output<OpKind::Reciprocal>, unary_backward, Reads::Nothing);
  // Input-saving ops.
  set(OpKind::Log, record_input<OpKind::Log>, unary_backward, Reads::ForSelf);
  set(OpKind::Abs, record_input<OpKind::Abs>, unary_backward, Reads::ForSelf);
  set(OpKind::Sign, record_input<OpKind::Sign>, unary_backward, Reads::ForSelf);
  set(OpKind::Gelu, record_input<OpKind::Gelu>, unary_backward, Reads::ForSelf);
  set(OpKind::Silu, record_input<OpKind::Silu>, unary_backward, Reads::ForSelf);
  set(OpKind::Square, record_input<OpKind::Square>, unary_backward, Reads::ForSelf);
  set(OpKind::Clamp, record_input<OpKind::Clamp>, clamp_backward, Reads::ForSelf);
  set(OpKind::Where, record_where, where_backward, Reads::Nothing);
  set(OpKind::Maximum, record_both<OpKind::Maximum>, extremum_backward<true>, Reads::Always);
  set(OpKind::Minimum, record_both<OpKind::Minimum>, extremum_backward<false>, Reads::Always);
}

}  // namespace memgrad::autograd
