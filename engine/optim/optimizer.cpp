// Optimizers: lazy state, fused update kernels, state dicts.
#include "engine/optim/optimizer.h"

#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "allocator/trace.h"
#include "engine/autograd_seam.h"
#include "engine/error.h"
#include "engine/factories.h"
#include "engine/op_support.h"

namespace memgrad::optim {
namespace {

class NoGradScope {
 public:
  NoGradScope() : previous_(grad_mode_enabled()) { set_grad_mode_enabled(false); }
  ~NoGradScope() { set_grad_mode_enabled(previous_); }

 private:
  bool previous_;
};

void check_non_negative(const char* what, double v) {
  if (!(v >= 0.0)) throw ValueError(fmt::format("[optim] Invalid {} value: {}", what, v));
}

const Tensor* find_tensor(const OptimizerState& s, const std::string& name) {
  for (const auto& [n, t] : s.tensors) {
    if (n == name) return &t;
  }
  return nullptr;
}

// Copies a saved state tensor into a fresh buffer shaped like `param` (or leaves it undefined).
Tensor restore(const OptimizerState& s, const std::string& name, const Tensor& param) {
  const Tensor* saved = find_tensor(s, name);
  if (saved == nullptr) return Tensor();
  if (!(saved->sizes() == param.sizes())) {
    throw CheckpointError(fmt::format("[optim] state {} has shape {} but the parameter has shape {}",
                                      name, to_string(saved->sizes()), to_string(param.sizes())));
  }
  NoGradScope no_grad;
  return saved->to(param.device()).to(param.dtype()).clone();
}

}  // namespace

// ---- Optimizer ----

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  check_non_negative("learning rate", lr);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].defined() || !params_[i].requires_grad()) {
      throw ValueError(fmt::format("[optim] parameter {} is undefined or does not require grad", i));
    }
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  TracePhaseScope phase("zero_grad");
  TraceOpScope op("zero_grad");
  NoGradScope no_grad;
  for (const Tensor& p : params_) {
    if (!p.grad().defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      Tensor g = p.grad();
      g.zero_();
    }
  }
}

void Optimizer::set_lr(double lr) {
  check_non_negative("learning rate", lr);
  lr_ = lr;
}

size_t Optimizer::state_nbytes() const {
  size_t n = 0;
  for (const Tensor& t : state_tensors()) {
    if (t.defined()) n += t.storage().allocated_nbytes();
  }
  return n;
}

Tensor Optimizer::prepared_grad(size_t i) const {
  const Tensor& p = params_[i];
  Tensor g = p.grad();
  if (!g.defined()) return g;
  if (!p.is_contiguous()) {
    throw ValueError(fmt::format("[optim] parameter {} of shape {} is not contiguous", i,
                                 to_string(p.sizes())));
  }
  if (!(g.sizes() == p.sizes())) {
    throw ValueError(fmt::format("[optim] gradient of shape {} for parameter {} of shape {}",
                                 to_string(g.sizes()), i, to_string(p.sizes())));
  }
  return g.to(p.dtype()).contiguous();
}

// ---- SGD ----

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params), options.lr), options_(options) {
  check_non_negative("momentum", options.momentum);
  check_non_negative("weight_decay", options.weight_decay);
  if (options.nesterov && (options.momentum <= 0.0 || options.dampening != 0.0)) {
    throw ValueError("[optim] Nesterov momentum requires a momentum and zero dampening");
  }
  momentum_.resize(params_.size());
}

void SGD::step() {
  TracePhaseScope phase("optimizer");
  TraceOpScope op("sgd_step");
  NoGradScope no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = prepared_grad(i);
    if (!g.defined()) continue;
    const Tensor& p = params_[i];
    const bool first = !momentum_[i].defined();
    if (first && options_.momentum != 0.0) momentum_[i] = empty_like(p);  // lazily, as PyTorch
    detail::kernels_for(p.device())
        .sgd_step(detail::operand(p), detail::operand(g),
                  momentum_[i].defined() ? detail::operand(momentum_[i]) : kernels::Operand{}, lr_,
                  options_.momentum, options_.dampening, options_.weight_decay, options_.nesterov,
                  first);
    p.storage().bump_version();
  }
}

OptimizerState SGD::state_dict() const {
  OptimizerState s;
  s.scalars["lr"] = lr_;
  s.scalars["momentum"] = options_.momentum;
  for (size_t i = 0; i < momentum_.size(); ++i) {
    if (momentum_[i].defined()) s.tensors.emplace_back(fmt::format("state.{}.momentum_buffer", i), momentum_[i]);
  }
  return s;
}

void SGD::load_state_dict(const OptimizerState& s) {
  if (auto it = s.scalars.find("lr"); it != s.scalars.end()) set_lr(it->second);
  for (size_t i = 0; i < params_.size(); ++i) {
    momentum_[i] = restore(s, fmt::format("state.{}.momentum_buffer", i), params_[i]);
  }
}

// ---- Adam / AdamW ----

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(params), options.lr), options_(options), decoupled_(decoupled) {
  check_non_negative("epsilon", options.eps);
  check_non_negative("weight_decay", options.weight_decay);
  for (double b : {options.beta1, options.beta2}) {
    if (!(b >= 0.0 && b < 1.0)) throw ValueError(fmt::format("[optim] Invalid beta parameter: {}", b));
  }
  exp_avg_.resize(params_.size());
  exp_avg_sq_.resize(params_.size());
  steps_.assign(params_.size(), 0);
}

void Adam::step() {
  TracePhaseScope phase("optimizer");
  TraceOpScope op(decoupled_ ? "adamw_step" : "adam_step");
  NoGradScope no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = prepared_grad(i);
    if (!g.defined()) continue;
    const Tensor& p = params_[i];
    if (!exp_avg_[i].defined()) {
      exp_avg_[i] = zeros_like(p);
      exp_avg_sq_[i] = zeros_like(p);
    }
    ++steps_[i];
    detail::kernels_for(p.device())
        .adam_step(detail::operand(p), detail::operand(g), detail::operand(exp_avg_[i]),
                   detail::operand(exp_avg_sq_[i]), lr_, options_.beta1, options_.beta2,
                   options_.eps, options_.weight_decay, decoupled_, steps_[i]);
    p.storage().bump_version();
  }
}

std::vector<Tensor> Adam::state_tensors() const {
  std::vector<Tensor> out = exp_avg_;
  out.insert(out.end(), exp_avg_sq_.begin(), exp_avg_sq_.end());
  return out;
}

OptimizerState Adam::state_dict() const {
  OptimizerState s;
  s.scalars["lr"] = lr_;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!exp_avg_[i].defined()) continue;
    s.tensors.emplace_back(fmt::format("state.{}.exp_avg", i), exp_avg_[i]);
    s.tensors.emplace_back(fmt::format("state.{}.exp_avg_sq", i), exp_avg_sq_[i]);
    s.scalars[fmt::format("state.{}.step", i)] = static_cast<double>(steps_[i]);
  }
  return s;
}

void Adam::load_state_dict(const OptimizerState& s) {
  if (auto it = s.scalars.find("lr"); it != s.scalars.end()) set_lr(it->second);
  for (size_t i = 0; i < params_.size(); ++i) {
    exp_avg_[i] = restore(s, fmt::format("state.{}.exp_avg", i), params_[i]);
    exp_avg_sq_[i] = restore(s, fmt::format("state.{}.exp_avg_sq", i), params_[i]);
    auto it = s.scalars.find(fmt::format("state.{}.step", i));
    steps_[i] = it == s.scalars.end() ? 0 : static_cast<int64_t>(it->second);
  }
}

// ---- schedule ----

CosineWithWarmup::CosineWithWarmup(Optimizer& optimizer, int64_t warmup, int64_t total,
                                   double min_lr)
    : optimizer_(optimizer), base_lr_(optimizer.lr()), warmup_(warmup), total_(total),
      min_lr_(min_lr) {
  if (warmup < 0 || total <= 0 || warmup > total) {
    throw ValueError(fmt::format("[CosineWithWarmup] need 0 <= warmup <= total and total > 0, got "
                                 "warmup {} total {}",
                                 warmup, total));
  }
  optimizer_.set_lr(lr_at(0));
}

double CosineWithWarmup::lr_at(int64_t step) const {
  if (step < warmup_) return base_lr_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
  const double progress = std::min(1.0, static_cast<double>(step - warmup_) /
                                            static_cast<double>(std::max<int64_t>(1, total_ - warmup_)));
  return min_lr_ + 0.5 * (base_lr_ - min_lr_) * (1.0 + std::cos(std::numbers::pi * progress));
}

void CosineWithWarmup::step() {
  ++step_;
  optimizer_.set_lr(lr_at(step_));
}

}  // namespace memgrad::optim
