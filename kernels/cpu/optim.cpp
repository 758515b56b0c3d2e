// Fused optimizer steps: one pass over each parameter, no temporaries (PyTorch's single-tensor
// Adam allocates a denominator per parameter per step; this does not).
#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/element_types.h"

namespace memgrad::kernels::cpu {
namespace {

constexpr int64_t kParallelAbove = 1 << 15;

template <typename T>
void sgd(const Operand& param, const Operand& grad, const Operand& buf, double lr, double momentum,
         double dampening, double wd, bool nesterov, bool first) {
  using C = compute_t<T>;
  T* p = static_cast<T*>(param.data);
  const T* g = static_cast<const T*>(grad.data);
  T* m = static_cast<T*>(buf.data);
  const int64_t n = param.numel();
  const C lr_c = static_cast<C>(lr), mom = static_cast<C>(momentum);
  const C damp = static_cast<C>(1.0 - dampening), wd_c = static_cast<C>(wd);
  if (wd == 0.0 && momentum != 0.0 && !nesterov && !first) {
    // The step of plain momentum SGD after the first, branch-free so it vectorises.
#pragma omp parallel for simd if (n > kParallelAbove) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const C b = mom * static_cast<C>(m[i]) + damp * static_cast<C>(g[i]);
      m[i] = static_cast<T>(b);
      p[i] = static_cast<T>(static_cast<C>(p[i]) - lr_c * b);
    }
    return;
  }
#pragma omp parallel for simd if (n > kParallelAbove) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    C d = static_cast<C>(g[i]);
    const C w = static_cast<C>(p[i]);
    if (wd != 0.0) d += wd_c * w;
    if (momentum != 0.0) {
      const C b = first ? d : mom * static_cast<C>(m[i]) + damp * d;
      m[i] = static_cast<T>(b);
      d = nesterov ? d + mom * b : b;
    }
    p[i] = static_cast<T>(w - lr_c * d);
  }
}

template <typename T>
void adam(const Operand& param, const Operand& grad, const Operand& m1, const Operand& m2,
          double lr, double beta1, double beta2, double eps, double wd, bool decoupled,
          int64_t step) {
  using C = compute_t<T>;
  T* p = static_cast<T*>(param.data);
  const T* g = static_cast<const T*>(grad.data);
  T* a = static_cast<T*>(m1.data);
  T* b = static_cast<T*>(m2.data);
  const int64_t n = param.numel();
  const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  const C step_size = static_cast<C>(lr / bc1);
  const C inv_sqrt_bc2 = static_cast<C>(1.0 / std::sqrt(bc2));
  const C b1 = static_cast<C>(beta1), b2 = static_cast<C>(beta2), e = static_cast<C>(eps);
  // 1 - beta in double: from a float beta2 = 0.999 it would be off by 1.3e-5 (relative).
  const C c1 = static_cast<C>(1.0 - beta1), c2 = static_cast<C>(1.0 - beta2);
  const C decay = static_cast<C>(decoupled ? 1.0 - lr * wd : 1.0);
  const C l2 = static_cast<C>(decoupled ? 0.0 : wd);
#pragma omp parallel for simd if (n > kParallelAbove) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    C w = static_cast<C>(p[i]) * decay;
    const C d = static_cast<C>(g[i]) + l2 * static_cast<C>(p[i]);
    const C ma = b1 * static_cast<C>(a[i]) + c1 * d;
    const C mb = b2 * static_cast<C>(b[i]) + c2 * d * d;
    a[i] = static_cast<T>(ma);
    b[i] = static_cast<T>(mb);
    w -= step_size * ma / (std::sqrt(mb) * inv_sqrt_bc2 + e);
    p[i] = static_cast<T>(w);
  }
}

}  // namespace

void CpuBackend::sgd_step(const Operand& param, const Operand& grad, const Operand& buf,
                          double lr, double momentum, double dampening, double weight_decay,
                          bool nesterov, bool first_step) {
  dispatch_floating(param.dtype, [&](auto tag) {
    sgd<decltype(tag)>(param, grad, buf, lr, momentum, dampening, weight_decay, nesterov,
                       first_step);
  });
}

void CpuBackend::adam_step(const Operand& param, const Operand& grad, const Operand& exp_avg,
                           const Operand& exp_avg_sq, double lr, double beta1, double beta2,
                           double eps, double weight_decay, bool decoupled, int64_t step) {
  dispatch_floating(param.dtype, [&](auto tag) {
    adam<decltype(tag)>(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay,
                        decoupled, step);
  });
}

}  // namespace memgrad::kernels::cpu
