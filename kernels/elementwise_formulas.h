// The elementwise formulas, written once for both backends: f(x) of every UnaryOp, its
// derivative, f(a, b) of every BinaryOp, the scalar-exponent pow derivative, clamp and its
// derivative, and the compute-type rules that decide in which type each call computes. The CPU
// loops (kernels/cpu/elementwise.cpp) and the CUDA kernels (kernels/cuda/elementwise.cu) call
// these functions, so a CPU test of this header tests the arithmetic the GPU runs. The one
// exception: on contiguous float rows the CPU computes exp, log, sqrt, rsqrt, tanh, sigmoid, silu,
// tanh-GELU and tanh-GELU's float32 gradient as Eigen array expressions of these same formulas,
// with Eigen's vectorised exp and tanh in place of libm's (tests/engine/elementwise_test.cpp and
// tests/nn/functional_test.cpp bound how far they differ).
//
// C is the compute type: float (float32 and float16, which is stored as half and computed in
// float on both sides), double, or int64. Products that feed a sum use mul_rn / add_rn
// (scalar_math.h) where both backends can then agree bit for bit; formulas that call a
// transcendental function use plain operators, since exp, tanh and erf already differ in the
// last bit between glibc and CUDA. Nothing here allocates.
#pragma once

#include "kernels/kernel_args.h"
#include "kernels/scalar_math.h"

namespace memgrad::kernels {

inline constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2 / pi), GELU tanh form
inline constexpr double kGeluCoeff = 0.044715;              // the cubic term of GELU tanh form
inline constexpr double kInvSqrt2 = 0.7071067811865476;     // 1 / sqrt(2), GELU erf form
inline constexpr double kInvSqrt2Pi = 0.3989422804014327;   // 1 / sqrt(2 pi), the normal pdf

// ---- forward: f(x) ----

// The ops the CPU's typed loops call directly, so their loops vectorise without a switch.
template <typename C>
MEMGRAD_HOST_DEVICE inline C neg_of(C x) {
  return static_cast<C>(-x);
}

// max(x, 0); a NaN passes through, as in PyTorch.
template <typename C>
MEMGRAD_HOST_DEVICE inline C relu_of(C x) {
  return x < C(0) ? C(0) : x;
}

template <typename C>
MEMGRAD_HOST_DEVICE inline C square_of(C x) {
  return mul_rn(x, x);
}

template <typename C>
MEMGRAD_HOST_DEVICE inline C sigmoid_of(C x) {
  return C(1) / (C(1) + std::exp(-x));
}

// f(x) for op. Integer C computes the ops that have an integer meaning in C and the others in
// double, truncated back (exp of an int64 tensor into an int64 output).
template <typename C>
MEMGRAD_HOST_DEVICE inline C unary_value(UnaryOp op, C x) {
  if constexpr (std::is_floating_point_v<C>) {
    switch (op) {
      case UnaryOp::Neg: return neg_of(x);
      case UnaryOp::Exp: return std::exp(x);
      case UnaryOp::Log: return std::log(x);
      case UnaryOp::Sqrt: return std::sqrt(x);
      case UnaryOp::Rsqrt: return C(1) / std::sqrt(x);
      case UnaryOp::Abs: return abs_of(x);
      case UnaryOp::Sign: return C((x > C(0)) - (x < C(0)));
      case UnaryOp::Tanh: return std::tanh(x);
      case UnaryOp::Sigmoid: return sigmoid_of(x);
      case UnaryOp::Relu: return relu_of(x);
      case UnaryOp::GeluTanh:
        return C(0.5) * x * (C(1) + std::tanh(C(kSqrt2OverPi) * (x + C(kGeluCoeff) * x * x * x)));
      case UnaryOp::GeluErf: return C(0.5) * x * (C(1) + std::erf(x * C(kInvSqrt2)));
      case UnaryOp::Silu: return x * sigmoid_of(x);
      case UnaryOp::Reciprocal: return C(1) / x;
      case UnaryOp::Square: return square_of(x);
      case UnaryOp::LogicalNot: return C(x == C(0));
    }
  } else {
    switch (op) {
      case UnaryOp::Neg: return neg_of(x);
      case UnaryOp::Abs: return abs_of(x);
      case UnaryOp::Sign: return static_cast<C>((x > C(0)) - (x < C(0)));
      case UnaryOp::Relu: return relu_of(x);
      case UnaryOp::Square: return square_of(x);
      case UnaryOp::LogicalNot: return static_cast<C>(x == C(0));
      default: return static_cast<C>(unary_value<double>(op, static_cast<double>(x)));
    }
  }
  return x;
}

// ---- backward: g f'(x), from the saved value s ----

// The derivatives the CPU's typed loops call directly (the ops of a training step).
template <typename C>
MEMGRAD_HOST_DEVICE inline C relu_grad(C g, C s) {  // s = relu(x)
  return s > C(0) ? g : C(0);
}

template <typename C>
MEMGRAD_HOST_DEVICE inline C tanh_grad(C g, C s) {  // s = tanh(x): g (1 - s^2)
  return mul_rn(g, add_rn(C(1), -mul_rn(s, s)));
}

template <typename C>
MEMGRAD_HOST_DEVICE inline C sigmoid_grad(C g, C s) {  // s = sigmoid(x): g s (1 - s)
  return mul_rn(mul_rn(g, s), add_rn(C(1), -s));
}

template <typename C>
MEMGRAD_HOST_DEVICE inline C exp_grad(C g, C s) {  // s = exp(x): g s
  return mul_rn(g, s);
}

// d/dx of op times g, at the saved value s: the op's output for Exp, Tanh, Sigmoid, Relu, Sqrt,
// Rsqrt and Reciprocal, its input for the others (backend.h).
template <typename C>
MEMGRAD_HOST_DEVICE inline C unary_grad(UnaryOp op, C g, C s) {
  switch (op) {
    case UnaryOp::Neg: return -g;
    case UnaryOp::Exp: return exp_grad(g, s);
    case UnaryOp::Log: return g / s;                           // s = x
    case UnaryOp::Sqrt: return g / mul_rn(C(2), s);            // s = sqrt(x)
    case UnaryOp::Rsqrt: return C(-0.5) * g * s * s * s;       // s = x^-1/2
    case UnaryOp::Abs: return g * C((s > C(0)) - (s < C(0)));  // s = x
    case UnaryOp::Sign: return C(0);
    case UnaryOp::Tanh: return tanh_grad(g, s);
    case UnaryOp::Sigmoid: return sigmoid_grad(g, s);
    case UnaryOp::Relu: return relu_grad(g, s);
    case UnaryOp::GeluTanh: {  // s = x
      const C inner = C(kSqrt2OverPi) * (s + C(kGeluCoeff) * s * s * s);
      const C t = std::tanh(inner);
      const C dinner = C(kSqrt2OverPi) * (C(1) + C(3 * kGeluCoeff) * s * s);
      return g * (C(0.5) * (C(1) + t) + C(0.5) * s * (C(1) - t * t) * dinner);
    }
    case UnaryOp::GeluErf: {  // s = x: g (cdf + x pdf)
      const C cdf = C(0.5) * (C(1) + std::erf(s * C(kInvSqrt2)));
      const C pdf = std::exp(C(-0.5) * s * s) * C(kInvSqrt2Pi);
      return g * (cdf + s * pdf);
    }
    case UnaryOp::Silu: {  // s = x
      const C sig = sigmoid_of(s);
      return g * sig * (C(1) + s * (C(1) - sig));
    }
    case UnaryOp::Reciprocal: return -mul_rn(mul_rn(g, s), s);  // s = 1/x: -g s^2
    case UnaryOp::Square: return mul_rn(mul_rn(C(2), g), s);    // s = x: 2 g x
    case UnaryOp::LogicalNot: return C(0);
  }
  return C(0);
}

// ---- binary: f(a, b) ----

// a + alpha b, in two roundings.
template <typename C>
MEMGRAD_HOST_DEVICE inline C add_value(C a, C b, C alpha) {
  return add_rn(a, mul_rn(alpha, b));
}

// a - alpha b, in two roundings.
template <typename C>
MEMGRAD_HOST_DEVICE inline C sub_value(C a, C b, C alpha) {
  return add_rn(a, static_cast<C>(-mul_rn(alpha, b)));
}

// f(a, b) for op; `alpha` scales b for Add and Sub. Comparisons give 0 or 1 in C. Integer
// division by zero gives 0 (PyTorch raises; the engine never sends it), pow of integers computes
// in double and truncates.
template <typename C>
MEMGRAD_HOST_DEVICE inline C binary_value(BinaryOp op, C a, C b, C alpha) {
  switch (op) {
    case BinaryOp::Add: return add_value(a, b, alpha);
    case BinaryOp::Sub: return sub_value(a, b, alpha);
    case BinaryOp::Mul: return mul_rn(a, b);
    case BinaryOp::Div:
      if constexpr (std::is_integral_v<C>)
        return b == 0 ? C(0) : static_cast<C>(a / b);
      else
        return a / b;
    case BinaryOp::Pow: return static_cast<C>(std::pow(a, b));
    case BinaryOp::Maximum:
      if (is_nan(a) || is_nan(b)) return static_cast<C>(a + b);  // NaN propagates
      return a > b ? a : b;
    case BinaryOp::Minimum:
      if (is_nan(a) || is_nan(b)) return static_cast<C>(a + b);
      return a < b ? a : b;
    case BinaryOp::Eq: return C(a == b);
    case BinaryOp::Ne: return C(a != b);
    case BinaryOp::Lt: return C(a < b);
    case BinaryOp::Le: return C(a <= b);
    case BinaryOp::Gt: return C(a > b);
    case BinaryOp::Ge: return C(a >= b);
    case BinaryOp::LogicalAnd: return C(a != C(0) && b != C(0));
    case BinaryOp::LogicalOr: return C(a != C(0) || b != C(0));
  }
  return C(0);
}

// ---- pow with a scalar exponent, clamp, where ----

// g e x^(e-1), and 0 for e = 0 (whatever x is).
template <typename C>
MEMGRAD_HOST_DEVICE inline C pow_scalar_grad(C g, C x, C e) {
  return e == C(0) ? C(0) : mul_rn(mul_rn(g, e), std::pow(x, static_cast<C>(e - C(1))));
}

// x limited to [lo, hi] (each bound only when present); a NaN stays a NaN.
template <typename C>
MEMGRAD_HOST_DEVICE inline C clamp_value(C x, C lo, C hi, bool has_min, bool has_max) {
  if (is_nan(x)) return x;
  if (has_min && x < lo) x = lo;
  if (has_max && x > hi) x = hi;
  return x;
}

// g where lo <= x <= hi (bounds included, as in PyTorch), else 0.
template <typename C>
MEMGRAD_HOST_DEVICE inline C clamp_grad(C g, C x, C lo, C hi, bool has_min, bool has_max) {
  const bool inside = (!has_min || x >= lo) && (!has_max || x <= hi);
  return inside ? g : C(0);
}

template <typename C>
MEMGRAD_HOST_DEVICE inline C where_value(C cond, C a, C b) {
  return cond != C(0) ? a : b;
}

// ---- compute types (host only: the backends' dispatch) ----

// The type a dtype computes in: float for float16 and bfloat16, the dtype itself otherwise.
constexpr DType compute_dtype(DType d) { return is_reduced_float(d) ? DType::Float32 : d; }

// The floating type of a floating-only op (a backward rule, clamp): float64 stays, everything
// else computes in float.
constexpr DType floating_compute_dtype(DType d) {
  return d == DType::Float64 ? DType::Float64 : DType::Float32;
}

// unary: one dtype (not bool) computes in its own compute type; a mixed call with a floating
// output in the output's; everything else (bool, int64 output of a float input) in float64.
constexpr DType unary_compute_dtype(DType out, DType in) {
  if (out == in && out != DType::Bool) return compute_dtype(out);
  return is_floating(out) ? compute_dtype(out) : DType::Float64;
}

// binary: one input dtype (not bool) with an output of that dtype, or bool for a comparison,
// computes in the inputs' compute type. Mixed comparisons compute in float64 when an input is
// floating, int64 otherwise; other mixed ops in the output's compute type (int64 for bool).
constexpr DType binary_compute_dtype(BinaryOp op, DType out, DType a, DType b) {
  if (a == b && a != DType::Bool && (out == a || (out == DType::Bool && is_comparison(op)))) {
    return compute_dtype(a);
  }
  const DType c = is_comparison(op)
                      ? (is_floating(a) || is_floating(b) ? DType::Float64 : DType::Int64)
                      : compute_dtype(out);
  return c == DType::Bool ? DType::Int64 : c;
}

// The dtype a binary_scalar scalar is stored in before it meets the tensor of dtype `a`: float
// for float32/16 tensors (float16 and bfloat16 compute with the scalar in float, not rounded),
// int64 when the scalar is integral and fits (any non-float64 tensor), float64 otherwise (an
// int64 tensor compared with 2.5 compares in floating point, as in PyTorch).
inline DType scalar_operand_dtype(DType a, double scalar) {
  if (a == DType::Float32 || is_reduced_float(a)) return DType::Float32;
  if (a != DType::Float64 && scalar == std::trunc(scalar) && std::abs(scalar) < 9e18) {
    return DType::Int64;
  }
  return DType::Float64;
}

}  // namespace memgrad::kernels
