// CUDA fused optimizer steps: one pass over each parameter, in place, no temporaries. The
// per-element formulas and the host-side constants are kernels/optim_formulas.h, the text the
// CPU backend runs too, so both agree bit for bit. One thread per element, grid-stride,
// 256-thread blocks, on the current stream; every operand is contiguous and of the parameter's
// dtype; float16 and bfloat16 compute in float (converted and rounded to nearest even as
// to_compute and from_compute do).
#include "kernels/cuda/cuda_backend.h"

#include "allocator/cuda_check.h"
#include "kernels/cuda/cuda_handles.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/optim_formulas.h"

namespace memgrad::kernels::cuda {
namespace {

// ---- kernels section ----

// param and buf (buf only with momentum) after one SGD step (optim_formulas.h).
template <typename T, typename C>
__global__ void sgd_kernel(T* param, const T* grad, T* buf, int64_t n, SgdConstants<C> a) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    sgd_step_element(a, param, grad, buf, i);
  }
}

// param, exp_avg (m1) and exp_avg_sq (m2) after one Adam step (optim_formulas.h).
template <typename T, typename C>
__global__ void adam_kernel(T* param, const T* grad, T* m1, T* m2, int64_t n, AdamConstants<C> a) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    adam_step_element(a, param, grad, m1, m2, i);
  }
}

}  // namespace

// ---- launchers section (the entry points) ----

void CudaBackend::sgd_step(const Operand& param, const Operand& grad, const Operand& buf, double lr,
                           double momentum, double dampening, double weight_decay, bool nesterov,
                           bool first_step) {
  const int64_t n = param.numel();
  if (n == 0) return;
  DeviceGuard guard(device_);
  dispatch_floating(param.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const SgdConstants<C> a =
        sgd_constants<C>(lr, momentum, dampening, weight_decay, nesterov, first_step);
    sgd_kernel<T, C><<<grid_for(n), kBlockThreads, 0, current_cuda_stream(device_)>>>(
        static_cast<T*>(param.data), static_cast<const T*>(grad.data), static_cast<T*>(buf.data), n,
        a);
  });
  check_launch("sgd_kernel", {&param, &grad, &buf});
}

void CudaBackend::adam_step(const Operand& param, const Operand& grad, const Operand& exp_avg,
                            const Operand& exp_avg_sq, double lr, double beta1, double beta2,
                            double eps, double weight_decay, bool decoupled, int64_t step) {
  const int64_t n = param.numel();
  if (n == 0) return;
  DeviceGuard guard(device_);
  dispatch_floating(param.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const AdamConstants<C> a =
        adam_constants<C>(lr, beta1, beta2, eps, weight_decay, decoupled, step);
    adam_kernel<T, C><<<grid_for(n), kBlockThreads, 0, current_cuda_stream(device_)>>>(
        static_cast<T*>(param.data), static_cast<const T*>(grad.data),
        static_cast<T*>(exp_avg.data), static_cast<T*>(exp_avg_sq.data), n, a);
  });
  check_launch("adam_kernel", {&param, &grad, &exp_avg, &exp_avg_sq});
}

}  // namespace memgrad::kernels::cuda
