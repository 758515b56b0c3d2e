// GradScaler: scale, unscale with an inf/NaN check, skip, update.
#include "autograd/grad_scaler.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "autograd/error.h"
#include "autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/reduce.h"

namespace memgrad::autograd {

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(options.init_scale) {
  if (!(options.growth_factor > 1.0)) {
    throw ValueError(
        fmt::format("[GradScaler] growth_factor must be > 1, got {}", options.growth_factor),
        "GradScaler", "growth_factor", fmt::format("{}", options.growth_factor));
  }
  if (!(options.backoff_factor > 0.0 && options.backoff_factor < 1.0)) {
    throw ValueError(fmt::format("[GradScaler] backoff_factor must be in (0, 1), got {}",
                                 options.backoff_factor),
                     "GradScaler", "backoff_factor", fmt::format("{}", options.backoff_factor));
  }
  if (options.growth_interval <= 0) {
    throw ValueError(
        fmt::format("[GradScaler] growth_interval must be > 0, got {}", options.growth_interval),
        "GradScaler", "growth_interval", fmt::format("{}", options.growth_interval));
  }
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!options_.enabled) return loss;
  return loss * scale_;
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  if (stage_ == Stage::Unscaled) {
    throw AutogradError(
        "unscale_() has already been called on this optimizer since the last update().");
  }
  if (stage_ == Stage::Stepped) throw AutogradError("unscale_() is being called after step().");
  NoGradGuard no_grad;
  // The reciprocal in float64, then float32, as PyTorch computes inv_scale.
  const double inv = static_cast<double>(static_cast<float>(1.0 / scale_));
  found_inf_ = false;
  bool deferred = false;
  for (size_t i = 0; i < optimizer.params().size(); ++i) {
    Tensor g = optimizer.params()[i].grad();
    if (!g.defined()) continue;
    // A master-weight parameter's gradient is unscaled by the optimizer, in float32.
    if (optimizer.has_master(i)) {
      deferred = true;
    } else {
      g.mul_(inv);
    }
    // Element by element, as PyTorch's check: the largest |element| (a NaN wins) is finite
    // exactly when every element is, however large their sum (one 0-d result, as a sum's).
    // On a meta device there are no values: no overflow (docs/estimate.md, "What is assumed").
    if (!std::isfinite(norm(g, INFINITY).item_or(0.0))) found_inf_ = true;
  }
  if (deferred) optimizer.set_master_grad_factor(inv);
  if (options_.combine_found_inf) found_inf_ = options_.combine_found_inf(found_inf_);
  stage_ = Stage::Unscaled;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  if (stage_ == Stage::Stepped) {
    throw AutogradError("step() has already been called since the last update().");
  }
  if (stage_ == Stage::Ready) unscale_(optimizer);
  stage_ = Stage::Stepped;
  if (found_inf_) {
    optimizer.set_master_grad_factor(1.0);  // the skipped step's factor is not carried over
    return false;
  }
  optimizer.step();
  return true;
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!options_.enabled) return;
  if (new_scale) {
    scale_ = *new_scale;
  } else if (found_inf_) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == options_.growth_interval) {
    // The scale is a float32, as PyTorch's: a growth past float32's range keeps the old one.
    const double grown = scale_ * options_.growth_factor;
    if (grown <= static_cast<double>(std::numeric_limits<float>::max())) scale_ = grown;
    growth_tracker_ = 0;
  }
  found_inf_ = false;
  stage_ = Stage::Ready;
}

std::map<std::string, double> GradScaler::state_dict() const {
  return {{"scale", scale_}, {"growth_tracker", static_cast<double>(growth_tracker_)}};
}

void GradScaler::load_state_dict(const std::map<std::string, double>& state) {
  if (auto it = state.find("scale"); it != state.end()) scale_ = it->second;
  if (auto it = state.find("growth_tracker"); it != state.end()) {
    growth_tracker_ = static_cast<int64_t>(it->second);
  }
}

}  // namespace memgrad::autograd
