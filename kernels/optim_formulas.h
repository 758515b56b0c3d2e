// The fused optimizer steps' per-element formulas, written once for both backends
// (kernels/cpu/optim.cpp, kernels/cuda/optim.cu): SGD with momentum, dampening, weight decay and
// Nesterov, and Adam / AdamW with bias correction. The constants are derived on the host in
// double (sgd_constants, adam_constants) and then rounded to the compute type C (float for
// float32 and float16, double for float64); every product that feeds a sum is mul_rn / add_rn,
// or one fma_rn where PyTorch's kernel fuses (SGD's `add_(x, alpha=a)` steps), so the two
// backends agree bit for bit, and SGD with torch.optim.SGD on the CPU. The *_step_element functions
// read and write one element of storage type T (float, double, or the backend's half type,
// converted to and from C with static_cast: round to nearest even on both). Nothing here allocates:
// a step updates the parameter and its state in place.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/scalar_math.h"

namespace memgrad::kernels {

// ---- SGD ----

template <typename C>
struct SgdConstants {
  C lr, momentum, damp, weight_decay;  // damp = 1 - dampening
  bool use_decay, use_momentum, nesterov, first;
};

template <typename C>
SgdConstants<C> sgd_constants(double lr, double momentum, double dampening, double weight_decay,
                              bool nesterov, bool first_step) {
  return {static_cast<C>(lr),
          static_cast<C>(momentum),
          static_cast<C>(1.0 - dampening),
          static_cast<C>(weight_decay),
          weight_decay != 0.0,
          momentum != 0.0,
          nesterov,
          first_step};
}

// The momentum buffer after a step: momentum buf + (1 - dampening) d, as PyTorch's
// buf.mul_(momentum).add_(d, alpha=1 - dampening): the product rounded, then one fused step.
template <typename C>
MEMGRAD_HOST_DEVICE inline C sgd_buffer(const SgdConstants<C>& a, C buf, C d) {
  return fma_rn(a.damp, d, mul_rn(a.momentum, buf));
}

// The parameter after a step in direction d: w - lr d (param.add_(d, alpha=-lr), fused).
template <typename C>
MEMGRAD_HOST_DEVICE inline C sgd_param(const SgdConstants<C>& a, C w, C d) {
  return fma_rn(static_cast<C>(-a.lr), d, w);
}

template <typename C>
struct SgdElement {
  C param;
  C buf;  // meaningful only with momentum
};

// One element's step from param w, gradient g and buffer buf (read only after the first step):
// d = g + weight_decay w; with momentum, buf = d on the first step, sgd_buffer after, and d
// becomes d + momentum buf (Nesterov) or buf; then w - lr d.
template <typename C>
MEMGRAD_HOST_DEVICE inline SgdElement<C> sgd_update(const SgdConstants<C>& a, C w, C g, C buf) {
  C d = g;
  if (a.use_decay) d = fma_rn(a.weight_decay, w, d);
  C b = C(0);
  if (a.use_momentum) {
    b = a.first ? d : sgd_buffer(a, buf, d);
    d = a.nesterov ? fma_rn(a.momentum, b, d) : b;
  }
  return {sgd_param(a, w, d), b};
}

// Element i of a parameter after one step: param, and buf with momentum (buf may be null
// without momentum; it is read only after the first step).
template <typename C, typename T>
MEMGRAD_HOST_DEVICE inline void sgd_step_element(const SgdConstants<C>& a, T* param, const T* grad,
                                                 T* buf, int64_t i) {
  const C old = a.use_momentum && !a.first ? static_cast<C>(buf[i]) : C(0);
  const SgdElement<C> e = sgd_update(a, static_cast<C>(param[i]), static_cast<C>(grad[i]), old);
  if (a.use_momentum) buf[i] = static_cast<T>(e.buf);
  param[i] = static_cast<T>(e.param);
}

// ---- Adam / AdamW ----

template <typename C>
struct AdamConstants {
  C step_size;     // lr / (1 - beta1^step)
  C inv_sqrt_bc2;  // 1 / sqrt(1 - beta2^step)
  C beta1, beta2, eps;
  C c1, c2;  // 1 - beta1, 1 - beta2
  C decay;   // AdamW: 1 - lr weight_decay; Adam: 1
  C l2;      // Adam: weight_decay; AdamW: 0
};

// 1 - beta in double: from a float beta2 = 0.999 it would be off by 1.3e-5 (relative).
template <typename C>
AdamConstants<C> adam_constants(double lr, double beta1, double beta2, double eps,
                                double weight_decay, bool decoupled, int64_t step) {
  const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  return {static_cast<C>(lr / bc1),
          static_cast<C>(1.0 / std::sqrt(bc2)),
          static_cast<C>(beta1),
          static_cast<C>(beta2),
          static_cast<C>(eps),
          static_cast<C>(1.0 - beta1),
          static_cast<C>(1.0 - beta2),
          static_cast<C>(decoupled ? 1.0 - lr * weight_decay : 1.0),
          static_cast<C>(decoupled ? 0.0 : weight_decay)};
}

template <typename C>
struct AdamElement {
  C param, exp_avg, exp_avg_sq;
};

// One element's step: d = g + l2 w; m = beta1 m + (1 - beta1) d; v = beta2 v + (1 - beta2) d^2;
// w = w decay - step_size m / (sqrt(v) inv_sqrt_bc2 + eps).
template <typename C>
MEMGRAD_HOST_DEVICE inline AdamElement<C> adam_update(const AdamConstants<C>& a, C w, C g, C m,
                                                      C v) {
  const C decayed = mul_rn(w, a.decay);
  const C d = add_rn(g, mul_rn(a.l2, w));
  const C ma = add_rn(mul_rn(a.beta1, m), mul_rn(a.c1, d));
  const C mb = add_rn(mul_rn(a.beta2, v), mul_rn(mul_rn(a.c2, d), d));
  const C denom = add_rn(mul_rn(std::sqrt(mb), a.inv_sqrt_bc2), a.eps);
  return {add_rn(decayed, static_cast<C>(-(mul_rn(a.step_size, ma) / denom))), ma, mb};
}

// Element i of a parameter, its exp_avg (m) and exp_avg_sq (v) after one step.
template <typename C, typename T>
MEMGRAD_HOST_DEVICE inline void adam_step_element(const AdamConstants<C>& a, T* param,
                                                  const T* grad, T* m, T* v, int64_t i) {
  const AdamElement<C> e = adam_update(a, static_cast<C>(param[i]), static_cast<C>(grad[i]),
                                       static_cast<C>(m[i]), static_cast<C>(v[i]));
  m[i] = static_cast<T>(e.exp_avg);
  v[i] = static_cast<T>(e.exp_avg_sq);
  param[i] = static_cast<T>(e.param);
}

}  // namespace memgrad::kernels
