// Optimizers: lazy state, fused update kernels, state dicts.
#include "engine/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

#include <fmt/format.h>

#include "allocator/trace.h"
#include "engine/autograd_seam.h"
#include "engine/error.h"
#include "engine/factories.h"
#include "engine/memory.h"
#include "engine/op_support.h"

namespace memgrad::optim {
namespace {

void check_non_negative(const char* what, double v) {
  if (!(v >= 0.0))
    throw ValueError(fmt::format("[optim] Invalid {} value: {}", what, v), "optim", what,
                     fmt::format("{}", v));
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
    throw CheckpointError(
        fmt::format("[optim] state {} has shape {} but the parameter has shape {}", name,
                    to_string(saved->sizes()), to_string(param.sizes())),
        "optim", "", name);
  }
  GradModeGuard no_grad(false);
  return saved->to(param.device()).to(param.dtype()).clone();
}

}  // namespace

// ---- Optimizer ----

Optimizer::Optimizer(std::vector<Tensor> params, double lr, bool master_weights)
    : params_(std::move(params)), lr_(lr), master_(params_.size()) {
  check_non_negative("learning rate", lr);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].defined() || !params_[i].requires_grad()) {
      throw ValueError(fmt::format("[optim] parameter {} is undefined or does not require grad", i),
                       "optim", fmt::format("params[{}]", i));
    }
  }
  if (!master_weights) return;
  GradModeGuard no_grad(false);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!is_reduced_float(p.dtype())) continue;
    if (!p.is_contiguous()) {
      throw ValueError(fmt::format("[optim] parameter {} of shape {} is not contiguous", i,
                                   to_string(p.sizes())),
                       "optim", fmt::format("params[{}]", i));
    }
    const TraceModuleScope module(p.storage().trace_module());
    master_[i] = p.to(kFloat32);  // a new tensor; exact: float32 holds every 16-bit value
    name_in_trace(master_[i], p.storage().trace_module(), "optimizer state");
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  TracePhaseScope phase("zero_grad");
  TraceOpScope op("zero_grad");
  GradModeGuard no_grad(false);
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

void Optimizer::check_state_names(const OptimizerState& state,
                                  std::initializer_list<const char*> tensor_names,
                                  std::initializer_list<const char*> scalar_names,
                                  std::initializer_list<const char*> global_scalars) const {
  // "state.<i>.<field>" with i a parameter index and field one of `fields`.
  auto known = [&](const std::string& key, std::initializer_list<const char*> fields) {
    size_t index = 0;
    const char* p = key.c_str();
    if (!key.starts_with("state.") || std::sscanf(p, "state.%zu.", &index) != 1 ||
        index >= params_.size()) {
      return false;
    }
    const std::string field = key.substr(key.find('.', 6) + 1);
    return key == fmt::format("state.{}.{}", index, field) &&
           std::any_of(fields.begin(), fields.end(), [&](const char* f) { return field == f; });
  };
  auto stranger = [&](const std::string& key) {
    return CheckpointError(fmt::format("[optim] the saved state holds '{}', which is not state of "
                                       "{} over {} parameters (saved by another optimizer?)",
                                       key, name(), params_.size()),
                           "optim", "", key);
  };
  for (const auto& [key, t] : state.tensors) {
    if (!known(key, tensor_names)) throw stranger(key);
  }
  for (const auto& [key, value] : state.scalars) {
    const bool global = key == "lr" || std::any_of(global_scalars.begin(), global_scalars.end(),
                                                   [&](const char* g) { return key == g; });
    if (!global && !known(key, scalar_names)) throw stranger(key);
  }
  if (auto it = state.scalars.find("lr");
      it != state.scalars.end() && !(it->second >= 0.0 && std::isfinite(it->second))) {
    throw CheckpointError(
        fmt::format("[optim] saved learning rate {} is not a finite number >= 0", it->second),
        "optim", "", "lr");
  }
}

void Optimizer::set_lr(double lr) {
  check_non_negative("learning rate", lr);
  lr_ = lr;
}

size_t Optimizer::state_nbytes() const {
  size_t n = master_nbytes();
  for (const Tensor& t : state_tensors()) {
    if (t.defined()) n += t.storage().allocated_nbytes();
  }
  return n;
}

size_t Optimizer::master_nbytes() const {
  size_t n = 0;
  for (const Tensor& t : master_) {
    if (t.defined()) n += t.storage().allocated_nbytes();
  }
  return n;
}

void Optimizer::write_back(size_t i) {
  if (master_[i].defined()) {
    Tensor p = params_[i];
    p.copy_(master_[i]);  // bumps the version
  } else {
    params_[i].storage().bump_version();
  }
}

std::vector<Tensor> Optimizer::restore_masters(const OptimizerState& s) const {
  std::vector<Tensor> masters = master_;
  GradModeGuard no_grad(false);
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string name = fmt::format("state.{}.master_param", i);
    const Tensor* saved = find_tensor(s, name);
    if (saved == nullptr) {
      // A state saved without master weights: the copy is taken again from the parameter as
      // it is now (a checkpoint loads the model first), not kept from before the load.
      if (master_[i].defined()) masters[i] = params_[i].to(kFloat32);
      continue;
    }
    if (!master_[i].defined()) {
      throw CheckpointError(fmt::format("[optim] the saved state has {} but parameter {} ({}) has "
                                        "no master copy here (master_weights off?)",
                                        name, i, dtype_name(params_[i].dtype())),
                            "optim", "", name);
    }
    masters[i] = restore(s, name, master_[i]);
  }
  return masters;
}

void Optimizer::save_masters(OptimizerState& s) const {
  for (size_t i = 0; i < master_.size(); ++i) {
    if (master_[i].defined())
      s.tensors.emplace_back(fmt::format("state.{}.master_param", i), master_[i]);
  }
}

Tensor Optimizer::prepared_grad(size_t i) const {
  const Tensor& p = params_[i];
  Tensor g = p.grad();
  if (!g.defined()) return g;
  if (!p.is_contiguous()) {
    throw ValueError(
        fmt::format("[optim] parameter {} of shape {} is not contiguous", i, to_string(p.sizes())),
        "optim", fmt::format("params[{}]", i));
  }
  if (!(g.sizes() == p.sizes())) {
    throw ValueError(fmt::format("[optim] gradient of shape {} for parameter {} of shape {}",
                                 to_string(g.sizes()), i, to_string(p.sizes())),
                     "optim", fmt::format("params[{}].grad", i));
  }
  if (!master_[i].defined()) return g.to(p.dtype()).contiguous();
  // A float32 temporary; the factor multiplies it in place (never the gradient itself).
  Tensor g32 = g.to(kFloat32).contiguous();
  if (g32.impl() == g.impl()) g32 = g32.clone();
  if (master_grad_factor_ != 1.0) g32.mul_(master_grad_factor_);
  return g32;
}

// ---- SGD ----

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params), options.lr, options.master_weights), options_(options) {
  check_non_negative("momentum", options.momentum);
  check_non_negative("weight_decay", options.weight_decay);
  if (options.nesterov && (options.momentum <= 0.0 || options.dampening != 0.0)) {
    throw ValueError("[optim] Nesterov momentum requires a momentum and zero dampening", "optim",
                     "nesterov", "true");
  }
  momentum_.resize(params_.size());
}

void SGD::step() {
  TracePhaseScope phase("optimizer");
  TraceOpScope op("sgd_step");
  GradModeGuard no_grad(false);
  for (size_t i = 0; i < params_.size(); ++i) {
    const TraceModuleScope module(params_[i].storage().trace_module());
    const Tensor g = prepared_grad(i);
    if (!g.defined()) continue;
    const Tensor& p = working(i);
    const bool first = !momentum_[i].defined();
    if (first && options_.momentum != 0.0) momentum_[i] = empty_like(p);  // lazily, as PyTorch
    detail::kernels_for(p.device())
        .sgd_step(detail::operand(p), detail::operand(g),
                  momentum_[i].defined() ? detail::operand(momentum_[i]) : kernels::Operand{}, lr_,
                  options_.momentum, options_.dampening, options_.weight_decay, options_.nesterov,
                  first);
    write_back(i);
  }
  step_done();
}

OptimizerState SGD::state_dict() const {
  OptimizerState s;
  s.scalars["lr"] = lr_;
  s.scalars["momentum"] = options_.momentum;
  for (size_t i = 0; i < momentum_.size(); ++i) {
    if (momentum_[i].defined())
      s.tensors.emplace_back(fmt::format("state.{}.momentum_buffer", i), momentum_[i]);
  }
  save_masters(s);
  return s;
}

void SGD::load_state_dict(const OptimizerState& s) {
  check_state_names(s, {"momentum_buffer", "master_param"}, {}, {"momentum"});
  std::vector<Tensor> momentum(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    momentum[i] = restore(s, fmt::format("state.{}.momentum_buffer", i), working(i));
  }
  std::vector<Tensor> masters = restore_masters(s);
  // Checked: from here nothing throws.
  if (auto it = s.scalars.find("lr"); it != s.scalars.end()) lr_ = it->second;
  momentum_ = std::move(momentum);
  master_ = std::move(masters);
}

// ---- Adam / AdamW ----

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(params), options.lr, options.master_weights),
      options_(options),
      decoupled_(decoupled) {
  options_.weight_decay = options.weight_decay.value_or(decoupled ? 0.01 : 0.0);
  check_non_negative("epsilon", options.eps);
  check_non_negative("weight_decay", *options_.weight_decay);
  for (double b : {options.beta1, options.beta2}) {
    if (!(b >= 0.0 && b < 1.0))
      throw ValueError(fmt::format("[optim] Invalid beta parameter: {}", b), "optim", "betas",
                       fmt::format("{}", b));
  }
  exp_avg_.resize(params_.size());
  exp_avg_sq_.resize(params_.size());
  steps_.assign(params_.size(), 0);
}

void Adam::step() {
  TracePhaseScope phase("optimizer");
  TraceOpScope op(decoupled_ ? "adamw_step" : "adam_step");
  GradModeGuard no_grad(false);
  for (size_t i = 0; i < params_.size(); ++i) {
    const TraceModuleScope module(params_[i].storage().trace_module());
    const Tensor g = prepared_grad(i);
    if (!g.defined()) continue;
    const Tensor& p = working(i);
    if (!exp_avg_[i].defined()) {
      exp_avg_[i] = zeros_like(p);
      exp_avg_sq_[i] = zeros_like(p);
    }
    ++steps_[i];
    detail::kernels_for(p.device())
        .adam_step(detail::operand(p), detail::operand(g), detail::operand(exp_avg_[i]),
                   detail::operand(exp_avg_sq_[i]), lr_, options_.beta1, options_.beta2,
                   options_.eps, *options_.weight_decay, decoupled_, steps_[i]);
    write_back(i);
  }
  step_done();
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
  save_masters(s);
  return s;
}

void Adam::load_state_dict(const OptimizerState& s) {
  check_state_names(s, {"exp_avg", "exp_avg_sq", "master_param"}, {"step"}, {});
  std::vector<Tensor> exp_avg(params_.size()), exp_avg_sq(params_.size());
  std::vector<int64_t> steps(params_.size(), 0);
  for (size_t i = 0; i < params_.size(); ++i) {
    exp_avg[i] = restore(s, fmt::format("state.{}.exp_avg", i), working(i));
    exp_avg_sq[i] = restore(s, fmt::format("state.{}.exp_avg_sq", i), working(i));
    const std::string step_key = fmt::format("state.{}.step", i);
    auto it = s.scalars.find(step_key);
    const bool has_state = exp_avg[i].defined() || exp_avg_sq[i].defined();
    // A parameter with state has both moments and has taken 1 to 2^53 steps (the bias
    // correction divides by 1 - beta^step, which is 0 at step 0); one without has neither.
    constexpr double kMaxStep = 9007199254740992.0;  // 2^53: every integer below is a double
    if (has_state &&
        !(exp_avg[i].defined() && exp_avg_sq[i].defined() && it != s.scalars.end() &&
          it->second >= 1.0 && it->second <= kMaxStep && it->second == std::floor(it->second))) {
      throw CheckpointError(
          fmt::format(
              "[optim] Adam state of parameter {} needs exp_avg, exp_avg_sq and an integer {} in "
              "[1, 2^53]; the saved state has {}{}",
              i, step_key,
              exp_avg[i].defined() && exp_avg_sq[i].defined() ? "both moments" : "one moment",
              it == s.scalars.end() ? " and no step" : fmt::format(" and step {}", it->second)),
          "optim", "", step_key);
    }
    if (!has_state && it != s.scalars.end()) {
      throw CheckpointError(
          fmt::format("[optim] {} is saved without exp_avg and exp_avg_sq", step_key), "optim", "",
          step_key);
    }
    steps[i] = has_state ? static_cast<int64_t>(it->second) : 0;
  }
  std::vector<Tensor> masters = restore_masters(s);
  // Checked: from here nothing throws.
  if (auto it = s.scalars.find("lr"); it != s.scalars.end()) lr_ = it->second;
  master_ = std::move(masters);
  exp_avg_ = std::move(exp_avg);
  exp_avg_sq_ = std::move(exp_avg_sq);
  steps_ = std::move(steps);
}

// ---- schedule ----

CosineWithWarmup::CosineWithWarmup(Optimizer& optimizer, int64_t warmup, int64_t total,
                                   double min_lr)
    : optimizer_(optimizer),
      base_lr_(optimizer.lr()),
      warmup_(warmup),
      total_(total),
      min_lr_(min_lr) {
  if (warmup < 0 || total <= 0 || warmup > total) {
    throw ValueError(fmt::format("[CosineWithWarmup] need 0 <= warmup <= total and total > 0, got "
                                 "warmup {} total {}",
                                 warmup, total),
                     "CosineWithWarmup", "warmup", fmt::format("{}", warmup));
  }
  optimizer_.set_lr(lr_at(0));
}

double CosineWithWarmup::lr_at(int64_t step) const {
  if (step < warmup_)
    return base_lr_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup_) /
                        static_cast<double>(std::max<int64_t>(1, total_ - warmup_)));
  return min_lr_ + 0.5 * (base_lr_ - min_lr_) * (1.0 + std::cos(std::numbers::pi * progress));
}

void CosineWithWarmup::step() {
  ++step_;
  optimizer_.set_lr(lr_at(step_));
}

}  // namespace memgrad::optim
