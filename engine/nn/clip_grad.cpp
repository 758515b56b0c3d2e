// clip_grad_norm_ and clip_grad_value_, op for op as PyTorch's, so their temporaries are its.
#include "engine/nn/clip_grad.h"

#include <cmath>

#include <fmt/format.h>

#include "allocator/trace.h"
#include "engine/autograd_seam.h"
#include "engine/elementwise.h"
#include "engine/error.h"
#include "engine/factories.h"
#include "engine/indexing.h"
#include "engine/reduce.h"

namespace memgrad::nn {
namespace {

std::vector<Tensor> gradients(const std::vector<Tensor>& parameters) {
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters) {
    if (Tensor g = p.grad(); g.defined()) grads.push_back(std::move(g));
  }
  return grads;
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  if (!(max_norm >= 0.0) || !(norm_type > 0.0)) {
    throw ValueError(fmt::format("[clip_grad_norm_] max_norm must be >= 0 and norm_type > 0, got "
                                 "{} and {}",
                                 max_norm, norm_type),
                     "clip_grad_norm_", "max_norm", fmt::format("{}", max_norm));
  }
  TracePhaseScope phase("clip_grad_norm_");
  GradModeGuard no_grad(false);
  const std::vector<Tensor> grads = gradients(parameters);
  if (grads.empty()) return zeros({});
  std::vector<Tensor> norms;
  norms.reserve(grads.size());
  for (const Tensor& g : grads) norms.push_back(norm(g, norm_type));
  const Tensor total = norm(stack(norms), norm_type);
  if (error_if_nonfinite && !std::isfinite(total.item_or(0.0))) {
    throw ValueError(fmt::format("[clip_grad_norm_] the total norm of order {} of the gradients "
                                 "is non-finite ({}), so they cannot be clipped",
                                 norm_type, total.item<double>()),
                     "clip_grad_norm_", "total_norm", fmt::format("{}", total.item<double>()));
  }
  const Tensor coefficient = max_norm / (total + 1e-6);
  const Tensor clamped = clamp(coefficient, std::nullopt, 1.0);
  for (const Tensor& g : grads) {
    Tensor target = g;
    target.mul_(clamped);
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  if (!(clip_value >= 0.0)) {
    throw ValueError(fmt::format("[clip_grad_value_] clip_value must be >= 0, got {}", clip_value),
                     "clip_grad_value_", "clip_value", fmt::format("{}", clip_value));
  }
  GradModeGuard no_grad(false);
  for (Tensor g : gradients(parameters)) clamp_(g, -clip_value, clip_value);
}

}  // namespace memgrad::nn
