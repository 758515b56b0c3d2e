// Module: registration, recursive traversal, device moves, state dicts.
#include "engine/nn/module.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "allocator/trace.h"
#include "engine/autograd_seam.h"
#include "engine/copy.h"
#include "engine/error.h"
#include "engine/memory.h"

namespace memgrad::nn {
namespace {

// Replaces t's data with `value`'s (same handle, same autograd identity), outside grad mode.
void assign_data(const Tensor& t, const Tensor& value) {
  GradModeGuard no_grad(false);
  t.impl()->set_data(*value.impl());
}

}  // namespace

Tensor& Module::register_parameter(const std::string& name, Tensor value) {
  if (value.defined() && !value.requires_grad()) value.requires_grad_(true);
  params_.emplace_back(name, std::move(value));
  name_in_trace(params_.back().second, trace_path_, "parameter");
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor value) {
  buffers_.emplace_back(name, std::move(value));
  name_in_trace(buffers_.back().second, trace_path_, "buffer");
  return buffers_.back().second;
}

void Module::adopt(const std::string& name, Module& child) const {
  const std::string_view own(trace_path_);
  child.set_trace_path(own.empty() ? name : fmt::format("{}.{}", own, name));
}

void Module::set_trace_path(std::string_view path) {
  trace_path_ = intern_trace_string(path);
  name_tensors();
  for (const auto& [name, child] : children_) adopt(name, *child);
}

void Module::name_tensors() const {
  for (const auto& [name, t] : params_) name_in_trace(t, trace_path_, "parameter");
  for (const auto& [name, t] : buffers_) name_in_trace(t, trace_path_, "buffer");
}

void Module::collect(const std::string& prefix, bool params, bool recurse,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [name, t] : params ? params_ : buffers_) {
    if (t.defined()) out.emplace_back(prefix + name, t);
  }
  if (!recurse) return;
  for (const auto& [name, child] : children_)
    child->collect(prefix + name + ".", params, true, out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", true, recurse, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", false, recurse, out);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  std::set<const TensorImpl*> seen;
  for (const Tensor& t : parameters()) {
    if (seen.insert(t.impl()).second) n += t.numel();
  }
  return n;
}

size_t Module::parameter_nbytes() const {
  size_t n = 0;
  std::set<const Storage*> seen;
  for (const Tensor& t : parameters()) {
    if (seen.insert(&t.storage()).second) n += t.storage().allocated_nbytes();
  }
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

Module& Module::to(Device device) {
  for (auto& [name, t] : named_parameters()) {
    if (t.device() != device) assign_data(t, to_device(t.detach(), device));
    // As PyTorch's Module._apply: an existing gradient follows its parameter.
    if (const Tensor g = t.grad(); g.defined() && g.device() != device) {
      t.set_grad(to_device(g, device));
    }
  }
  for (auto& [name, t] : named_buffers()) {
    if (t.device() != device) assign_data(t, to_device(t, device));
  }
  set_trace_path(trace_path_);  // the moved tensors are new blocks
  return *this;
}

Module& Module::to(DType dtype) {
  for (auto& [name, t] : named_parameters()) {
    if (t.dtype() != dtype && is_floating(t.dtype())) assign_data(t, to_dtype(t.detach(), dtype));
    if (const Tensor g = t.grad(); g.defined() && g.dtype() != dtype && is_floating(g.dtype())) {
      t.set_grad(to_dtype(g, dtype));
    }
  }
  for (auto& [name, t] : named_buffers()) {
    if (t.dtype() != dtype && is_floating(t.dtype())) assign_data(t, to_dtype(t, dtype));
  }
  set_trace_path(trace_path_);
  return *this;
}

void Module::zero_grad(bool set_to_none) {
  for (const Tensor& p : parameters()) {
    if (!p.grad().defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      Tensor g = p.grad();
      GradModeGuard no_grad(false);
      g.zero_();
    }
  }
}

StateDict Module::state_dict() const {
  StateDict out = named_parameters();
  for (auto& entry : named_buffers()) out.push_back(std::move(entry));
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  const std::vector<std::pair<Tensor, Tensor>> copies = check_state_dict(state, strict);
  GradModeGuard no_grad(false);
  for (const auto& [target, value] : copies) Tensor(target).copy_(value);
}

std::vector<std::pair<Tensor, Tensor>> Module::check_state_dict(const StateDict& state,
                                                                bool strict) const {
  StateDict mine = state_dict();
  std::vector<std::string> missing, unexpected, mismatched;
  // Everything is checked before anything is copied, so a failed load changes nothing.
  std::vector<std::pair<Tensor, Tensor>> copies;  // (parameter or buffer, value to load)
  for (auto& [name, target] : mine) {
    auto it =
        std::find_if(state.begin(), state.end(), [&](const auto& e) { return e.first == name; });
    if (it == state.end()) {
      missing.push_back(name);
      continue;
    }
    if (!(it->second.sizes() == target.sizes())) {
      mismatched.push_back(
          fmt::format("{}: copying a param with shape {}, the shape in the "
                      "current model is {}",
                      name, to_string(it->second.sizes()), to_string(target.sizes())));
      continue;
    }
    copies.emplace_back(target, it->second);
  }
  for (const auto& [name, t] : state) {
    if (std::none_of(mine.begin(), mine.end(), [&](const auto& e) { return e.first == name; })) {
      unexpected.push_back(name);
    }
  }
  if (!mismatched.empty() || (strict && (!missing.empty() || !unexpected.empty()))) {
    std::string msg =
        fmt::format("[load_state_dict] error(s) in loading state_dict for {}:", name());
    if (strict && !missing.empty()) {
      msg += fmt::format(" Missing key(s): \"{}\".", fmt::join(missing, "\", \""));
    }
    if (strict && !unexpected.empty()) {
      msg += fmt::format(" Unexpected key(s): \"{}\".", fmt::join(unexpected, "\", \""));
    }
    for (const std::string& m : mismatched) msg += " size mismatch for " + m + ".";
    throw CheckpointError(msg, "load_state_dict");
  }
  return copies;
}

std::string Module::str() const { return str(0); }

std::string Module::str(int indent) const {
  std::string out = name() + "(" + extra_repr();
  if (children_.empty()) return out + ")";
  out += "\n";
  const std::string pad(static_cast<size_t>(indent + 2), ' ');
  for (const auto& [child_name, child] : children_) {
    out += pad + "(" + child_name + "): " + child->str(indent + 2) + "\n";
  }
  return out + std::string(static_cast<size_t>(indent), ' ') + ")";
}

// ---- UnaryModule: forward hooks ----

Tensor UnaryModule::operator()(const Tensor& x) {
  const TraceModuleScope module(trace_path());
  // Copies of the lists: a hook may remove hooks while they run.
  if (pre_hooks_.empty() && hooks_.empty()) return forward(x);
  const auto pre_hooks = pre_hooks_;
  for (const auto& [id, hook] : pre_hooks) hook(*this, x);
  Tensor y = forward(x);
  const auto hooks = hooks_;
  for (const auto& [id, hook] : hooks) hook(*this, x, y);
  return y;
}

uint64_t UnaryModule::register_forward_pre_hook(ForwardPreHook hook) {
  pre_hooks_.emplace_back(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

uint64_t UnaryModule::register_forward_hook(ForwardHook hook) {
  hooks_.emplace_back(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

void UnaryModule::remove_forward_hook(uint64_t id) {
  std::erase_if(pre_hooks_, [id](const auto& entry) { return entry.first == id; });
  std::erase_if(hooks_, [id](const auto& entry) { return entry.first == id; });
}

}  // namespace memgrad::nn
