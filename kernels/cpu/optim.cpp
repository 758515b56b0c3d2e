// Fused optimizer steps: one pass over each parameter, no temporaries (PyTorch's single-tensor
// Adam allocates a denominator per parameter per step; this does not). The per-element formulas
// are kernels/optim_formulas.h, shared with the CUDA backend; this file holds the loops.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/element_types.h"
#include "kernels/optim_formulas.h"

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
  const SgdConstants<C> a = sgd_constants<C>(lr, momentum, dampening, wd, nesterov, first);
  if (a.use_momentum && !a.use_decay && !a.nesterov && !a.first) {
    // The step of plain momentum SGD after the first, branch-free so it vectorises.
#pragma omp parallel for simd if (n > kParallelAbove) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const C b = sgd_buffer(a, static_cast<C>(m[i]), static_cast<C>(g[i]));
      m[i] = static_cast<T>(b);
      p[i] = static_cast<T>(sgd_param(a, static_cast<C>(p[i]), b));
    }
    return;
  }
  // firstprivate: each thread's own copy of the constants, which no store through p or m can
  // reach, so the loop vectorises.
#pragma omp parallel for simd firstprivate(a) if (n > kParallelAbove) schedule(static)
  for (int64_t i = 0; i < n; ++i) sgd_step_element(a, p, g, m, i);
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
  const AdamConstants<C> k = adam_constants<C>(lr, beta1, beta2, eps, wd, decoupled, step);
#pragma omp parallel for simd if (n > kParallelAbove) schedule(static)
  for (int64_t i = 0; i < n; ++i) adam_step_element(k, p, g, a, b, i);
}

}  // namespace

void CpuBackend::sgd_step(const Operand& param, const Operand& grad, const Operand& buf, double lr,
                          double momentum, double dampening, double weight_decay, bool nesterov,
                          bool first_step) {
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
