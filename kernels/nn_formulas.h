// The nn kernels' per-element formulas, written once for both backends (kernels/cpu/nn.cpp,
// kernels/cuda/nn.cu): layer norm's normalised value and affine output, its input gradient,
// and cross entropy's loss and logit gradient. Row statistics (mean, rstd, the log-sum-exp, the
// gradient row sums) are accumulated in double by each backend in its own order; the formulas
// that use them round here, with mul_rn / add_rn, the same way on both. Nothing here allocates.
#pragma once

#include "kernels/scalar_math.h"

namespace memgrad::kernels {

// ---- layer norm ----

// xhat = (x - mean) rstd, in double.
MEMGRAD_HOST_DEVICE inline double layer_norm_xhat(double x, double mean, double rstd) {
  return mul_rn(x - mean, rstd);
}

// y = xhat w + b in the compute type C; the weight and the bias only where the layer has them.
template <typename C>
MEMGRAD_HOST_DEVICE inline C layer_norm_value(double xhat, bool has_weight, C weight, bool has_bias,
                                              C bias) {
  C v = static_cast<C>(xhat);
  if (has_weight) v = mul_rn(v, weight);
  if (has_bias) v = add_rn(v, bias);
  return v;
}

// dx = rstd (gw - mean(gw) - xhat mean(gw xhat)), with gw = dy w (dy without a weight) and the
// two row means mg and mgx.
MEMGRAD_HOST_DEVICE inline double layer_norm_dx(double rstd, double gw, double mg, double xhat,
                                                double mgx) {
  return mul_rn(rstd, add_rn(add_rn(gw, -mg), -mul_rn(xhat, mgx)));
}

// ---- cross entropy (log_softmax + NLL with label smoothing s over C classes) ----

// -(1 - s) log_probs[target] - (s / C) sum(log_probs), from the picked log-probability (as
// stored, i.e. rounded to the logits' dtype) and the row sum.
MEMGRAD_HOST_DEVICE inline double cross_entropy_loss(double picked, double sum_log_probs,
                                                     double smoothing, int64_t classes) {
  const double spread = smoothing / static_cast<double>(classes);
  return add_rn(mul_rn(-(1.0 - smoothing), picked), -mul_rn(spread, sum_log_probs));
}

// d loss / d logit of one class: g (exp(log_prob) - y), with the smoothed target
// y = (1 - s) [class is the target] + s / C (spread = s / C) and g the row's incoming gradient
// (0 for an ignored row).
// `prob` is exp(log_prob), computed by the caller (the CPU kernel exponentiates a row at once).
MEMGRAD_HOST_DEVICE inline double cross_entropy_grad_from_prob(double g, double prob,
                                                               bool is_target, double smoothing,
                                                               double spread) {
  const double y = (is_target ? 1.0 - smoothing : 0.0) + spread;
  return g * (prob - y);
}

MEMGRAD_HOST_DEVICE inline double cross_entropy_grad(double g, double log_prob, bool is_target,
                                                     double smoothing, double spread) {
  return cross_entropy_grad_from_prob(g, std::exp(log_prob), is_target, smoothing, spread);
}

}  // namespace memgrad::kernels
