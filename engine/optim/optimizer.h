// Optimizers: SGD (momentum, Nesterov, weight decay), Adam and AdamW, and a cosine learning-rate
// schedule with warm-up.
//
// Memory: optimizer state is allocated lazily, at the first step() that sees a parameter's
// gradient, exactly like PyTorch: SGD with momentum holds one buffer per parameter (1x the
// parameter bytes), Adam two (2x). step() itself allocates nothing: each parameter is updated by
// one fused kernel (no temporaries), under no-grad. Parameters without a gradient are skipped.
//
// Master weights (`master_weights = true`, mixed-precision training as DeepSpeed, Megatron and
// the ZeRO paper account it): parameters and gradients stay in float16 or bfloat16 (2 + 2 bytes
// per element) while the optimizer keeps, for each such parameter, a float32 copy (allocated at
// construction, 4 bytes) and its state in float32 (Adam 8 bytes, lazily): 2 + 2 + 12 = 16 bytes
// per parameter with Adam. step() converts the gradient to float32 (a temporary of the
// parameter's elements x 4 bytes, freed before the next parameter), updates the copy with the
// same fused kernel, and writes the copy back into the parameter, rounded to nearest even.
// float32 parameters in the same optimizer are stepped as usual.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/nn/module.h"
#include "engine/tensor.h"

namespace memgrad::optim {

// Tensors by PyTorch-style name ("state.0.momentum_buffer") and scalars ("state.0.step", "lr").
struct OptimizerState {
  nn::StateDict tensors;
  std::map<std::string, double> scalars;
};

class Optimizer {
 public:
  // master_weights: keep float32 master copies of the float16/bfloat16 parameters (above).
  Optimizer(std::vector<Tensor> params, double lr, bool master_weights = false);
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  virtual ~Optimizer() = default;

  // One update of every parameter that has a gradient. Throws ValueError for a non-contiguous
  // parameter or a gradient of another shape.
  virtual void step() = 0;
  // Frees every gradient (set_to_none, PyTorch's default since 2.0) or zeroes them.
  void zero_grad(bool set_to_none = true);

  double lr() const { return lr_; }
  void set_lr(double lr);
  const std::vector<Tensor>& params() const { return params_; }
  // Bytes of optimizer state currently allocated (rounded as the allocator rounds), the master
  // weights included.
  size_t state_nbytes() const;
  // Bytes of the float32 master copies alone (0 without master weights).
  size_t master_nbytes() const;
  // Whether parameter i is stepped through a float32 master copy.
  bool has_master(size_t i) const { return master_[i].defined(); }
  // The float32 master copy of parameter i (undefined when it has none).
  const Tensor& master(size_t i) const { return master_[i]; }
  // Multiplies the gradients of the master-weight parameters by `factor` as the next step()
  // converts them to float32 (GradScaler::unscale_: unscaling in float16 would underflow, which
  // is what the scale is there to prevent). Reset to 1 by that step().
  void set_master_grad_factor(double factor) { master_grad_factor_ = factor; }

  // "SGD", "Adam" or "AdamW", as PyTorch names the classes.
  virtual std::string name() const = 0;
  // State tensors the optimizer keeps per parameter, each of the parameter's elements (in
  // float32 with master weights): SGD with momentum 1, without 0; Adam and AdamW 2.
  virtual int64_t state_tensors_per_parameter() const = 0;

  virtual OptimizerState state_dict() const = 0;
  // Restores a state saved by state_dict(), all or nothing: everything is checked before any
  // state changes. Throws CheckpointError on a mismatch (a state of another shape, names of
  // another optimizer's state, a learning rate or step count that is not a valid number).
  virtual void load_state_dict(const OptimizerState& state) = 0;

 protected:
  // Checks every name of `state` against this optimizer's: tensors "state.<i>.<one of
  // tensor_names>" and scalars "lr", one of `global_scalars` or "state.<i>.<one of
  // scalar_names>" for a parameter index i, and that lr is a finite number >= 0. Throws
  // CheckpointError naming the first stranger.
  void check_state_names(const OptimizerState& state,
                         std::initializer_list<const char*> tensor_names,
                         std::initializer_list<const char*> scalar_names,
                         std::initializer_list<const char*> global_scalars) const;
  // The gradient of parameter i ready for a fused kernel (contiguous, in the dtype of
  // working(i); with a master copy a float32 temporary, multiplied by the pending factor), or
  // undefined when it has none.
  Tensor prepared_grad(size_t i) const;
  // What step() updates for parameter i: its float32 master copy, or the parameter itself.
  const Tensor& working(size_t i) const { return master_[i].defined() ? master_[i] : params_[i]; }
  // After parameter i's update: the master copy rounded into the parameter; the parameter's
  // version bumped either way.
  void write_back(size_t i);
  // Called at the end of step(): the master factor is spent.
  void step_done() { master_grad_factor_ = 1.0; }
  // Checks and restores "state.<i>.master_param" of `state` (a state without one: the copy is
  // made again from the parameter as it is now); all or nothing with the caller's own state:
  // returns the copies to commit.
  std::vector<Tensor> restore_masters(const OptimizerState& state) const;
  void save_masters(OptimizerState& state) const;
  virtual std::vector<Tensor> state_tensors() const = 0;

  std::vector<Tensor> params_;
  double lr_;
  std::vector<Tensor> master_;  // float32 copies; undefined where a parameter has none
  double master_grad_factor_ = 1.0;
};

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool master_weights = false;  // float32 copies of float16/bfloat16 parameters (above)
};

class SGD final : public Optimizer {
 public:
  // Throws ValueError for a negative lr/momentum/weight decay, or Nesterov without momentum.
  SGD(std::vector<Tensor> params, SGDOptions options);
  void step() override;
  std::string name() const override { return "SGD"; }
  int64_t state_tensors_per_parameter() const override { return options_.momentum != 0.0; }
  OptimizerState state_dict() const override;
  void load_state_dict(const OptimizerState& state) override;
  const SGDOptions& options() const { return options_; }

 protected:
  std::vector<Tensor> state_tensors() const override { return momentum_; }

 private:
  SGDOptions options_;
  std::vector<Tensor> momentum_;  // undefined until the first step with a gradient
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // Unset: PyTorch's defaults, 0 for Adam and 0.01 for AdamW (options() then holds the value).
  std::optional<double> weight_decay = std::nullopt;
  bool master_weights = false;  // float32 copies of float16/bfloat16 parameters (above)
};

class Adam : public Optimizer {
 public:
  // decoupled = true makes it AdamW. Throws ValueError for out-of-range hyper-parameters.
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled = false);
  void step() override;
  std::string name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  int64_t state_tensors_per_parameter() const override { return 2; }
  OptimizerState state_dict() const override;
  void load_state_dict(const OptimizerState& state) override;
  const AdamOptions& options() const { return options_; }

 protected:
  std::vector<Tensor> state_tensors() const override;

 private:
  AdamOptions options_;
  bool decoupled_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  std::vector<int64_t> steps_;
};

class AdamW final : public Adam {
 public:
  // PyTorch's AdamW: weight decay 0.01 unless options say otherwise.
  explicit AdamW(std::vector<Tensor> params, AdamOptions options = {})
      : Adam(std::move(params), options, /*decoupled=*/true) {}
};

// Linear warm-up to the base lr over `warmup` steps, then cosine decay to min_lr at `total`.
class CosineWithWarmup {
 public:
  CosineWithWarmup(Optimizer& optimizer, int64_t warmup, int64_t total, double min_lr = 0.0);
  // Advances one step and sets the optimizer's lr.
  void step();
  double lr_at(int64_t step) const;
  int64_t current_step() const { return step_; }

 private:
  Optimizer& optimizer_;
  double base_lr_;
  int64_t warmup_, total_;
  double min_lr_;
  int64_t step_ = 0;
};

}  // namespace memgrad::optim
