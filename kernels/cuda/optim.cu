// CUDA fused optimizer steps: one pass over each parameter, in place, no temporaries (the same
// formulas as kernels/cpu/optim.cpp, constants derived on the host in double exactly as there).
// One thread per element, grid-stride, 256-thread blocks, on the current stream; every operand
// is contiguous and of the parameter's dtype; float16 computes in float.
#include "kernels/cuda/cuda_backend.h"

#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_handles.h"
#include "kernels/cuda/launch.cuh"

namespace memgrad::kernels::cuda {
namespace {

template <typename C>
struct SgdArgs {
  C lr, momentum, damp, weight_decay;  // damp = 1 - dampening
  bool use_decay, use_momentum, nesterov, first;
};

template <typename C>
struct AdamArgs {
  C step_size, inv_sqrt_bc2, beta1, beta2, eps, c1, c2, decay, l2;
};

// ---- kernels section ----

// buf = momentum buf + (1 - dampening) g' (g' on the first step); param -= lr (nesterov ?
// g' + momentum buf : buf), with g' = grad + weight_decay param.
template <typename T, typename C>
__global__ void sgd_kernel(T* param, const T* grad, T* buf, int64_t n, SgdArgs<C> a) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    C d = to_compute<C>(grad[i]);
    const C w = to_compute<C>(param[i]);
    if (a.use_decay) d = add_rn(d, mul_rn(a.weight_decay, w));
    if (a.use_momentum) {
      const C b = a.first ? d : add_rn(mul_rn(a.momentum, to_compute<C>(buf[i])), mul_rn(a.damp, d));
      buf[i] = from_compute<T>(b);
      d = a.nesterov ? add_rn(d, mul_rn(a.momentum, b)) : b;
    }
    param[i] = from_compute<T>(add_rn(w, -mul_rn(a.lr, d)));
  }
}

template <typename T, typename C>
__global__ void adam_kernel(T* param, const T* grad, T* m1, T* m2, int64_t n, AdamArgs<C> a) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    const C p = to_compute<C>(param[i]);
    C w = mul_rn(p, a.decay);
    const C d = add_rn(to_compute<C>(grad[i]), mul_rn(a.l2, p));
    const C ma = add_rn(mul_rn(a.beta1, to_compute<C>(m1[i])), mul_rn(a.c1, d));
    const C mb = add_rn(mul_rn(a.beta2, to_compute<C>(m2[i])), mul_rn(mul_rn(a.c2, d), d));
    m1[i] = from_compute<T>(ma);
    m2[i] = from_compute<T>(mb);
    C root;
    if constexpr (std::is_same_v<C, float>) root = sqrtf(mb);
    else root = sqrt(mb);
    const C denom = add_rn(mul_rn(root, a.inv_sqrt_bc2), a.eps);
    w = add_rn(w, -(mul_rn(a.step_size, ma) / denom));
    param[i] = from_compute<T>(w);
  }
}

}  // namespace

// ---- entry points ----

void CudaBackend::sgd_step(const Operand& param, const Operand& grad, const Operand& buf,
                           double lr, double momentum, double dampening, double weight_decay,
                           bool nesterov, bool first_step) {
  const int64_t n = param.numel();
  if (n == 0) return;
  DeviceGuard guard(device_);
  dispatch_floating(param.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const SgdArgs<C> a{static_cast<C>(lr), static_cast<C>(momentum),
                       static_cast<C>(1.0 - dampening), static_cast<C>(weight_decay),
                       weight_decay != 0.0, momentum != 0.0, nesterov, first_step};
    sgd_kernel<T, C><<<grid_for(n), kBlockThreads, 0, current_cuda_stream(device_)>>>(
        static_cast<T*>(param.data), static_cast<const T*>(grad.data), static_cast<T*>(buf.data),
        n, a);
  });
  check_launch("sgd_kernel", {&param, &grad, &buf});
}

void CudaBackend::adam_step(const Operand& param, const Operand& grad, const Operand& exp_avg,
                            const Operand& exp_avg_sq, double lr, double beta1, double beta2,
                            double eps, double weight_decay, bool decoupled, int64_t step) {
  const int64_t n = param.numel();
  if (n == 0) return;
  DeviceGuard guard(device_);
  const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  dispatch_floating(param.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    // 1 - beta in double: from a float beta2 = 0.999 it would be off by 1.3e-5 (relative).
    const AdamArgs<C> a{static_cast<C>(lr / bc1),
                        static_cast<C>(1.0 / std::sqrt(bc2)),
                        static_cast<C>(beta1),
                        static_cast<C>(beta2),
                        static_cast<C>(eps),
                        static_cast<C>(1.0 - beta1),
                        static_cast<C>(1.0 - beta2),
                        static_cast<C>(decoupled ? 1.0 - lr * weight_decay : 1.0),
                        static_cast<C>(decoupled ? 0.0 : weight_decay)};
    adam_kernel<T, C><<<grid_for(n), kBlockThreads, 0, current_cuda_stream(device_)>>>(
        static_cast<T*>(param.data), static_cast<const T*>(grad.data),
        static_cast<T*>(exp_avg.data), static_cast<T*>(exp_avg_sq.data), n, a);
  });
  check_launch("adam_kernel", {&param, &grad, &exp_avg, &exp_avg_sq});
}

}  // namespace memgrad::kernels::cuda
