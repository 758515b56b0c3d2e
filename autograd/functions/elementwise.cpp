// Elementwise ops: for each, what it saves and its backward formula, side by side.
//
// Saved, as PyTorch's derivatives.yaml: add/sub/neg and the scalar ops nothing (s / x its
// input, x ^ s its input); mul each input only when the other needs a gradient; div the divisor,
// and the dividend when the divisor needs a gradient; exp, tanh, sigmoid, relu, sqrt, rsqrt,
// reciprocal their result; log, abs, gelu, silu, square, clamp their input; pow, maximum,
// minimum both inputs; sign nothing (its gradient is zero); where its condition. Unary backward
// rules run as one fused kernel (grad_in = grad_out * f'(saved)), so backward allocates only the
// gradient.
#include "autograd/functions/common.h"

namespace memgrad::autograd {
namespace {

// ---- add, sub: d(a + alpha b) = (g, alpha g); d(a - alpha b) = (g, -alpha g) ----
template <OpKind K>
struct AddSub {
  static constexpr OpKind kind = K;
  static constexpr int kSign = K == OpKind::Add ? 1 : -1;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) {
    Tensor ga, gb;
    if (n.needs_grad(0)) ga = sum_to(g[0], n.input(0).sizes);
    if (n.needs_grad(1)) {
      const double scale = kSign * n.attrs<AlphaAttrs>().alpha;
      gb = sum_to(scale == 1.0 ? g[0] : g[0] * scale, n.input(1).sizes);
    }
    return {ga, gb};
  }
};

// ---- mul: d(a b) = (g b, g a) ----
struct Mul {
  static constexpr OpKind kind = OpKind::Mul;
  static constexpr ReadsSelf reads_self = ReadsSelf::ForOtherGrads;
  enum Saved { kA, kB };
  // Each input only when the other input needs a gradient.
  static void save(OpNode& n, Inputs in, Outputs) {
    if (n.needs_grad(1)) n.save(kA, in[0]);
    if (n.needs_grad(0)) n.save(kB, in[1]);
  }
  static Grads backward(OpNode& n, const Grads& g) {
    Tensor ga, gb;
    if (n.needs_grad(0)) ga = sum_to(g[0] * n.unpack(kB), n.input(0).sizes);
    if (n.needs_grad(1)) gb = sum_to(g[0] * n.unpack(kA), n.input(1).sizes);
    return {ga, gb};
  }
};

// ---- div: d(a / b) = (g / b, -g a / b^2) ----
struct Div {
  static constexpr OpKind kind = OpKind::Div;
  static constexpr ReadsSelf reads_self = ReadsSelf::ForOtherGrads;
  enum Saved { kA, kB };
  // b always (both gradients read it); a only when b needs a gradient.
  static void save(OpNode& n, Inputs in, Outputs) {
    if (n.needs_grad(1)) n.save(kA, in[0]);
    n.save(kB, in[1]);
  }
  static Grads backward(OpNode& n, const Grads& g) {
    const Tensor b = n.unpack(kB);
    Tensor ga, gb;
    if (n.needs_grad(0)) ga = sum_to(g[0] / b, n.input(0).sizes);
    if (n.needs_grad(1)) gb = sum_to(-g[0] * n.unpack(kA) / (b * b), n.input(1).sizes);
    return {ga, gb};
  }
};

// ---- x + s, s - x, -x: d = g, -g, -g ----
template <OpKind K>
struct SignedIdentity {
  static constexpr OpKind kind = K;
  static constexpr int kSign = K == OpKind::AddScalar ? 1 : -1;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode&, const Grads& g) { return {kSign > 0 ? g[0] : -g[0]}; }
};

// ---- x s: d = g s ----
struct MulScalar {
  static constexpr OpKind kind = OpKind::MulScalar;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) {
    return {g[0] * n.attrs<ScalarAttrs>().scalar};
  }
};

// ---- x / s: d = g / s;  s / x: d = -g s / x^2 ----
struct DivScalar {
  static constexpr OpKind kind = OpKind::DivScalar;
  enum Saved { kX };
  // x only for s / x (in-place div_ is always x / s: nothing to copy).
  static void save(OpNode& n, Inputs in, Outputs) {
    if (n.attrs<ScalarAttrs>().scalar_first) n.save(kX, in[0]);
  }
  static Grads backward(OpNode& n, const Grads& g) {
    const ScalarAttrs& a = n.attrs<ScalarAttrs>();
    if (!a.scalar_first) return {g[0] / a.scalar};
    const Tensor x = n.unpack(kX);
    return {-g[0] * a.scalar / (x * x)};
  }
};

// ---- x ^ e: d = g e x^(e-1), fused ----
struct PowScalar {
  static constexpr OpKind kind = OpKind::PowScalar;
  static constexpr ReadsSelf reads_self = ReadsSelf::ForSelfGrad;
  enum Saved { kX };
  static void save(OpNode& n, Inputs in, Outputs) { n.save(kX, in[0]); }
  static Grads backward(OpNode& n, const Grads& g) {
    return {pow_scalar_backward(g[0], n.unpack(kX), n.attrs<ScalarAttrs>().scalar)};
  }
};

// ---- pow: d(a^b) = (g b a^(b-1), g a^b log a), 0 where a == 0 in the second (PyTorch) ----
struct Pow {
  static constexpr OpKind kind = OpKind::Pow;
  static constexpr ReadsSelf reads_self = ReadsSelf::Always;
  enum Saved { kA, kB };
  static void save(OpNode& n, Inputs in, Outputs) {
    n.save(kA, in[0]);
    n.save(kB, in[1]);
  }
  static Grads backward(OpNode& n, const Grads& g) {
    const Tensor a = n.unpack(kA), b = n.unpack(kB);
    Tensor ga, gb;
    if (n.needs_grad(0)) ga = sum_to(g[0] * b * pow(a, b - 1.0), n.input(0).sizes);
    if (n.needs_grad(1)) {
      const Tensor term = pow(a, b) * log(a);
      gb = sum_to(g[0] * where(a.eq(0.0), zeros_like(term), term), n.input(1).sizes);
    }
    return {ga, gb};
  }
};

// ---- exp, tanh, sigmoid, relu, sqrt, rsqrt, reciprocal: d = g f'(x) written with the result
// (exp: g y; tanh: g (1 - y^2); sigmoid: g y (1 - y); relu: g [y > 0]; sqrt: g / 2y; rsqrt:
// -g y^3 / 2; reciprocal: -g y^2), in one fused kernel. In place they copy nothing. ----
template <OpKind K>
struct UnaryOfResult {
  static constexpr OpKind kind = K;
  enum Saved { kResult };
  static void save(OpNode& n, Inputs, Outputs out) { n.save_output(kResult, out[0]); }
  static Grads backward(OpNode& n, const Grads& g) {
    return {unary_backward(K, g[0], n.unpack(kResult))};
  }
};

// ---- log, abs, gelu, silu, square: d = g f'(x) from the input (log: g / x; abs: g sign(x);
// square: 2 g x; gelu and silu: their derivatives), in one fused kernel. ----
template <OpKind K>
struct UnaryOfInput {
  static constexpr OpKind kind = K;
  static constexpr ReadsSelf reads_self = ReadsSelf::ForSelfGrad;
  enum Saved { kX };
  static void save(OpNode& n, Inputs in, Outputs) { n.save(kX, in[0]); }
  static Grads backward(OpNode& n, const Grads& g) {
    if constexpr (K == OpKind::Gelu) {
      return {unary_backward(K, g[0], n.unpack(kX), n.attrs<GeluAttrs>())};
    } else {
      return {unary_backward(K, g[0], n.unpack(kX))};
    }
  }
};

// ---- sign: d = 0 (saves nothing; the gradient is zeros of the input) ----
struct Sign {
  static constexpr OpKind kind = OpKind::Sign;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads&) { return {zeros_for(n.input(0))}; }
};

// ---- clamp: d = g where min <= x <= max ----
struct Clamp {
  static constexpr OpKind kind = OpKind::Clamp;
  static constexpr ReadsSelf reads_self = ReadsSelf::ForSelfGrad;
  enum Saved { kX };
  static void save(OpNode& n, Inputs in, Outputs) { n.save(kX, in[0]); }
  static Grads backward(OpNode& n, const Grads& g) {
    return {clamp_backward(g[0], n.unpack(kX), n.attrs<ClampAttrs>())};
  }
};

// ---- where(c, a, b): d = (-, g where c, g where not c) ----
struct Where {
  static constexpr OpKind kind = OpKind::Where;
  enum Saved { kCondition };
  static void save(OpNode& n, Inputs in, Outputs) { n.save(kCondition, in[0]); }
  static Grads backward(OpNode& n, const Grads& g) {
    const Tensor c = n.unpack(kCondition);
    const Tensor zero = zeros({}, TensorOptions(g[0].dtype()).with_device(g[0].device()));
    Tensor ga, gb;
    if (n.needs_grad(1)) ga = sum_to(where(c, g[0], zero), n.input(1).sizes);
    if (n.needs_grad(2)) gb = sum_to(where(c, zero, g[0]), n.input(2).sizes);
    return {Tensor(), ga, gb};
  }
};

// ---- maximum, minimum: the gradient goes to the selected input, halved on ties (PyTorch) ----
template <OpKind K>
struct Extremum {
  static constexpr OpKind kind = K;
  static constexpr ReadsSelf reads_self = ReadsSelf::Always;
  enum Saved { kA, kB };
  static void save(OpNode& n, Inputs in, Outputs) {
    n.save(kA, in[0]);
    n.save(kB, in[1]);
  }
  static Grads backward(OpNode& n, const Grads& g) {
    const Tensor a = n.unpack(kA), b = n.unpack(kB);
    const DType dt = g[0].dtype();
    const Tensor picked = K == OpKind::Maximum ? a.gt(b) : a.lt(b);
    const Tensor wins = picked.to(dt) + a.eq(b).to(dt) * 0.5;
    Tensor ga, gb;
    if (n.needs_grad(0)) ga = sum_to(g[0] * wins, n.input(0).sizes);
    if (n.needs_grad(1)) gb = sum_to(g[0] * (1.0 - wins), n.input(1).sizes);
    return {ga, gb};
  }
};

}  // namespace

void register_elementwise_ops() {
  register_op<AddSub<OpKind::Add>>();
  register_op<AddSub<OpKind::Sub>>();
  register_op<Mul>();
  register_op<Div>();
  register_op<SignedIdentity<OpKind::AddScalar>>();
  register_op<MulScalar>();
  register_op<DivScalar>();
  register_op<SignedIdentity<OpKind::RSubScalar>>();
  register_op<SignedIdentity<OpKind::Neg>>();
  register_op<Pow>();
  register_op<PowScalar>();
  register_op<UnaryOfResult<OpKind::Exp>>();
  register_op<UnaryOfResult<OpKind::Tanh>>();
  register_op<UnaryOfResult<OpKind::Sigmoid>>();
  register_op<UnaryOfResult<OpKind::Relu>>();
  register_op<UnaryOfResult<OpKind::Sqrt>>();
  register_op<UnaryOfResult<OpKind::Rsqrt>>();
  register_op<UnaryOfResult<OpKind::Reciprocal>>();
  register_op<UnaryOfInput<OpKind::Log>>();
  register_op<UnaryOfInput<OpKind::Abs>>();
  register_op<UnaryOfInput<OpKind::Gelu>>();
  register_op<UnaryOfInput<OpKind::Silu>>();
  register_op<UnaryOfInput<OpKind::Square>>();
  register_op<Sign>();
  register_op<Clamp>();
  register_op<Where>();
  register_op<Extremum<OpKind::Maximum>>();
  register_op<Extremum<OpKind::Minimum>>();
}

}  // namespace memgrad::autograd
