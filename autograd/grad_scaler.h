// GradScaler: loss scaling for float16 training (torch.amp.GradScaler).
//
// float16 gradients underflow to zero below about 6e-8. The scaler multiplies the loss by a
// large factor (65536 at first) so gradients stay representable, divides the gradients by it
// before the optimizer step, and skips the step when any gradient became inf or NaN (the scale
// was too large), halving the scale; after `growth_interval` clean steps it doubles the scale.
// Memory: nothing beyond two numbers; unscaling works in place on the gradients.
//
// With an optimizer that keeps float32 master weights (optim::SGDOptions/AdamOptions
// master_weights), the float16 gradients of the master-weight parameters stay scaled: unscale_()
// checks them for inf/NaN (an overflow of the scaled gradient is an inf in float16) and hands the
// factor to the optimizer, which applies it as it converts each gradient to float32. To clip
// such gradients, clip at max_norm x get_scale().
//
// Distributed training: each rank checks only the gradients it holds (a ZeRO shard, or all of
// them under DDP); `combine_found_inf` makes the decision collective, so every rank skips or
// steps together (distributed::any_rank gives one).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "engine/optim/optimizer.h"
#include "engine/tensor.h"

namespace memgrad::autograd {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
  // Given whether this process found an inf/NaN, whether any rank did (unset: this one alone).
  std::function<bool(bool)> combine_found_inf = nullptr;
};

class GradScaler {
 public:
  // Throws ValueError unless growth_factor > 1, 0 < backoff_factor < 1, growth_interval > 0.
  explicit GradScaler(GradScalerOptions options = {});

  // loss x scale (recorded, so backward produces scaled gradients). Allocates: one 0-d tensor.
  Tensor scale(const Tensor& loss) const;
  // Divides the optimizer's gradients by the scale, in place, and notes whether any is inf or
  // NaN. Throws AutogradError if called twice before update() or after step().
  void unscale_(optim::Optimizer& optimizer);
  // Unscales if needed, then steps unless a gradient was inf/NaN. Returns whether it stepped.
  bool step(optim::Optimizer& optimizer);
  // Backs off after a skipped step, grows after growth_interval clean ones (or sets new_scale).
  void update(std::optional<double> new_scale = std::nullopt);

  double get_scale() const { return scale_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  bool found_inf() const { return found_inf_; }
  bool is_enabled() const { return options_.enabled; }

  // {"scale", "growth_tracker"}, for training checkpoints.
  std::map<std::string, double> state_dict() const;
  void load_state_dict(const std::map<std::string, double>& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  GradScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  bool found_inf_ = false;
  Stage stage_ = Stage::Ready;
};

}  // namespace memgrad::autograd
