// CPU unary kernels (exp, log, tanh, relu, ... and casts through them), clamp and where.
// The loops and the names they use: kernels/cpu/elementwise_rows.h.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_rows.h"
#include "kernels/elementwise_formulas.h"

namespace memgrad::kernels::cpu {
namespace {

using detail::map1;
using detail::mixed_loop;
using detail::same_dtype;

// Eigen's vectorised transcendental functions on a contiguous float/double row: the formulas of
// elementwise_formulas.h as array expressions, with Eigen's exp, log and tanh in place of libm's
// (tests/engine/elementwise_test.cpp states how closely the two agree).
template <typename T>
bool eigen_unary(UnaryOp op, T* o, const T* x, int64_t n) {
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  Eigen::Map<Array> out(o, n);
  Eigen::Map<const Array> in(x, n);
  switch (op) {
    case UnaryOp::Exp: out = in.exp(); return true;
    case UnaryOp::Log: out = in.log(); return true;
    case UnaryOp::Sqrt: out = in.sqrt(); return true;
    case UnaryOp::Rsqrt: out = in.rsqrt(); return true;
    case UnaryOp::Tanh: out = in.tanh(); return true;
    // sigmoid_of's 1 / (1 + exp(-x)) with the vectorised exp: Eigen's logistic() is accurate
    // only in absolute terms for float (6e-5 relative near 1e-3, the tail silu multiplies).
    case UnaryOp::Sigmoid: out = (T(1) + (-in).exp()).inverse(); return true;
    case UnaryOp::Silu: out = in * (T(1) + (-in).exp()).inverse(); return true;
    case UnaryOp::GeluTanh:
      out = T(0.5) * in * (T(1) + (T(kSqrt2OverPi) * (in + T(kGeluCoeff) * in.cube())).tanh());
      return true;
    default: return false;
  }
}

template <typename T>
void unary_row(UnaryOp op, char* o, const char* a, int64_t so, int64_t sa, int64_t n) {
  constexpr auto es = static_cast<int64_t>(sizeof(T));
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (so == es && sa == es &&
        eigen_unary(op, reinterpret_cast<T*>(o), reinterpret_cast<const T*>(a), n)) {
      return;
    }
  }
  switch (op) {  // hoist the switch out of the loop for the cheap ops
    case UnaryOp::Neg: return map1<T>(o, a, so, sa, n, [](auto x) { return neg_of(x); });
    case UnaryOp::Relu: return map1<T>(o, a, so, sa, n, [](auto x) { return relu_of(x); });
    case UnaryOp::Abs: return map1<T>(o, a, so, sa, n, [](auto x) { return abs_of(x); });
    case UnaryOp::Square: return map1<T>(o, a, so, sa, n, [](auto x) { return square_of(x); });
    default: return map1<T>(o, a, so, sa, n, [op](auto x) { return unary_value(op, x); });
  }
}

}  // namespace

void CpuBackend::unary(UnaryOp op, const Operand& out, const Operand& in) {
  const std::array<const Operand*, 2> ops = {&out, &in};
  if (same_dtype({&out, &in})) {
    const LoopNest<2> nest = LoopNest<2>::make(ops);
    dispatch_dtype(out.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        mixed_loop<double, 2>(ops, [op](auto v) { return unary_value(op, v[0]); });
      } else {
        parallel_run(nest, base_pointers(ops), [&](auto p, auto s, int64_t n) {
          unary_row<T>(op, p[0], p[1], s[0], s[1], n);
        });
      }
    });
    return;
  }
  // e.g. exp of an int64 tensor into float32: compute in the output's type.
  dispatch_floating(unary_compute_dtype(out.dtype, in.dtype), [&](auto tag) {
    using C = compute_t<decltype(tag)>;
    mixed_loop<C, 2>(ops, [op](auto v) { return unary_value(op, v[0]); });
  });
}

void CpuBackend::clamp(const Operand& out, const Operand& in, double min, double max, bool has_min,
                       bool has_max) {
  const std::array<const Operand*, 2> ops = {&out, &in};
  const DType c = is_floating(out.dtype) ? floating_compute_dtype(out.dtype) : DType::Float64;
  dispatch_floating(c, [&](auto tag) {
    using C = compute_t<decltype(tag)>;
    const C lo = static_cast<C>(min), hi = static_cast<C>(max);
    mixed_loop<C, 2>(ops, [=](auto v) { return clamp_value(v[0], lo, hi, has_min, has_max); });
  });
}

void CpuBackend::where(const Operand& out, const Operand& cond, const Operand& a,
                       const Operand& b) {
  const std::array<const Operand*, 4> ops = {&out, &cond, &a, &b};
  const DType c = is_floating(out.dtype) ? compute_dtype(out.dtype) : out.dtype;
  dispatch_dtype(c, [&](auto tag) {
    using C = compute_t<decltype(tag)>;
    mixed_loop<C, 4>(ops, [](auto v) { return where_value(v[0], v[1], v[2]); });
  });
}

}  // namespace memgrad::kernels::cpu
