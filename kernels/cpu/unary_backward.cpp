// CPU backward kernels of the elementwise ops: unary_backward (the fused backward of each
// unary op), pow with a scalar exponent, clamp. The loops and the names they use:
// kernels/cpu/elementwise_rows.h.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_rows.h"
#include "kernels/elementwise_formulas.h"

namespace memgrad::kernels::cpu {
namespace {

using detail::map2;
using detail::mixed_loop;
using detail::same_dtype;

// Elements per block of gelu_tanh_grad_float (a stack buffer for tanh).
constexpr int64_t kGeluBlock = 1024;

// unary_grad's GeluTanh rule on a contiguous float32 row, with Eigen's vectorised tanh: the
// tanh the forward's contiguous path (eigen_unary) uses, so forward and backward see the same
// values. std::tanh, which the scalar rule calls, costs a libm call (tanhf, then expm1f) per
// element. Float64 keeps the scalar rule: Eigen has no vectorised tanh for double.
void gelu_tanh_grad_float(float* o, const float* g, const float* x, int64_t n) {
  using Array = Eigen::Array<float, Eigen::Dynamic, 1>;
  const auto k = static_cast<float>(kSqrt2OverPi), c = static_cast<float>(kGeluCoeff);
  const auto c3 = static_cast<float>(3 * kGeluCoeff);
  float buffer[kGeluBlock];
  for (int64_t b = 0; b < n; b += kGeluBlock) {
    const int64_t len = std::min(kGeluBlock, n - b);
    Eigen::Map<const Array> s(x + b, len), gr(g + b, len);
    Eigen::Map<Array> t(buffer, len);
    t = (k * (s + c * s * s * s)).tanh();
    const auto dinner = k * (1.0f + c3 * s * s);
    Eigen::Map<Array>(o + b, len) = gr * (0.5f * (1.0f + t) + 0.5f * s * (1.0f - t * t) * dinner);
  }
}

// grad_in = unary_grad(op, grad_out, saved) over one row, all three of type T.
template <typename T>
void unary_grad_row(UnaryOp op, char* o, const char* g, const char* sv, int64_t so, int64_t sg,
                    int64_t ss, int64_t n) {
  using C = compute_t<T>;
  switch (op) {  // hoist the switch out of the loop for the ops of a training step
    case UnaryOp::Relu:
      return map2<T, T>(o, g, sv, so, sg, ss, n, [](C x, C y) { return relu_grad(x, y); });
    case UnaryOp::Tanh:
      return map2<T, T>(o, g, sv, so, sg, ss, n, [](C x, C y) { return tanh_grad(x, y); });
    case UnaryOp::Sigmoid:
      return map2<T, T>(o, g, sv, so, sg, ss, n, [](C x, C y) { return sigmoid_grad(x, y); });
    case UnaryOp::Exp:
      return map2<T, T>(o, g, sv, so, sg, ss, n, [](C x, C y) { return exp_grad(x, y); });
    case UnaryOp::GeluTanh:
      if constexpr (std::is_same_v<T, float>) {
        constexpr int64_t es = sizeof(float);
        if (so == es && sg == es && ss == es) {
          return gelu_tanh_grad_float(reinterpret_cast<float*>(o),
                                      reinterpret_cast<const float*>(g),
                                      reinterpret_cast<const float*>(sv), n);
        }
      }
      return map2<T, T>(o, g, sv, so, sg, ss, n, [op](C x, C y) { return unary_grad(op, x, y); });
    default:
      return map2<T, T>(o, g, sv, so, sg, ss, n, [op](C x, C y) { return unary_grad(op, x, y); });
  }
}

}  // namespace

void CpuBackend::unary_backward(UnaryOp op, const Operand& grad_in, const Operand& grad_out,
                                const Operand& saved) {
  const std::array<const Operand*, 3> ops = {&grad_in, &grad_out, &saved};
  if (same_dtype({&grad_in, &grad_out, &saved})) {
    const LoopNest<3> nest = LoopNest<3>::make(ops);
    dispatch_floating(grad_in.dtype, [&](auto tag) {
      using T = decltype(tag);
      parallel_run(nest, base_pointers(ops), [&](auto p, auto s, int64_t n) {
        unary_grad_row<T>(op, p[0], p[1], p[2], s[0], s[1], s[2], n);
      });
    });
    return;
  }
  dispatch_floating(floating_compute_dtype(grad_in.dtype), [&](auto tag) {
    using C = compute_t<decltype(tag)>;
    mixed_loop<C, 3>(ops, [op](auto v) { return unary_grad(op, v[0], v[1]); });
  });
}

void CpuBackend::pow_scalar_backward(const Operand& grad_in, const Operand& grad_out,
                                     const Operand& x, double exponent) {
  const std::array<const Operand*, 3> ops = {&grad_in, &grad_out, &x};
  dispatch_floating(floating_compute_dtype(grad_in.dtype), [&](auto tag) {
    using C = compute_t<decltype(tag)>;
    const C e = static_cast<C>(exponent);
    mixed_loop<C, 3>(ops, [e](auto v) { return pow_scalar_grad(v[0], v[1], e); });
  });
}

void CpuBackend::clamp_backward(const Operand& grad_in, const Operand& grad_out, const Operand& x,
                                double min, double max, bool has_min, bool has_max) {
  const std::array<const Operand*, 3> ops = {&grad_in, &grad_out, &x};
  dispatch_floating(floating_compute_dtype(grad_in.dtype), [&](auto tag) {
    using C = compute_t<decltype(tag)>;
    const C lo = static_cast<C>(min), hi = static_cast<C>(max);
    mixed_loop<C, 3>(ops, [=](auto v) { return clamp_grad(v[0], v[1], lo, hi, has_min, has_max); });
  });
}

}  // namespace memgrad::kernels::cpu
