// Checkpointing: a node that keeps the inputs and recomputes the function in backward.
#include "autograd/checkpoint.h"

#include <fmt/format.h>

#include "allocator/trace.h"
#include "autograd/autocast.h"
#include "autograd/backward.h"
#include "autograd/grad_mode.h"
#include "autograd/graph.h"
#include "autograd/hooks.h"
#include "engine/error.h"
#include "engine/generator.h"

namespace memgrad::autograd {
namespace {

// The generator states of the devices the inputs live on (and the CPU's).
std::vector<std::pair<Device, GeneratorState>> capture_rng(const std::vector<Tensor>& inputs) {
  std::vector<std::pair<Device, GeneratorState>> states = {
      {kCPU, default_generator(kCPU).get_state()}};
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    bool seen = false;
    for (const auto& [d, s] : states) seen = seen || d == t.device();
    if (!seen) states.emplace_back(t.device(), default_generator(t.device()).get_state());
  }
  return states;
}

void restore_rng(const std::vector<std::pair<Device, GeneratorState>>& states) {
  for (const auto& [d, s] : states) default_generator(d).set_state(s);
}

class CheckpointNode final : public Node {
 public:
  CheckpointNode(CheckpointFunction fn, const std::vector<Tensor>& inputs, bool preserve_rng,
                 std::vector<std::pair<Device, GeneratorState>> rng, AutocastState autocast)
      : fn_(std::move(fn)), preserve_rng_(preserve_rng), rng_(std::move(rng)), autocast_(autocast) {
    // Through the saved-tensor hooks like every node's saves (PyTorch's checkpoint keeps its
    // inputs with save_for_backward, which the hooks see too).
    for (const Tensor& t : inputs) {
      saved_.emplace_back(t, /*is_output=*/false, current_saved_tensor_hooks());
      requires_grad_.push_back(t.defined() && t.requires_grad());
    }
  }

  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override {
    TraceLabelScope label("checkpoint recomputation");
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < saved_.size(); ++i) {
      Tensor t = saved_[i].unpack(*this);
      if (t.defined()) {
        t = t.detach();
        if (requires_grad_[i]) t.requires_grad_();
      }
      inputs.push_back(t);
    }
    // Recompute from the forward's random state, then put the current state back.
    const auto current = capture_rng(inputs);
    if (preserve_rng_) restore_rng(rng_);
    std::vector<Tensor> outputs;
    {
      EnableGradGuard grad;
      AutocastStateGuard autocast(autocast_);
      TracePhaseScope phase("forward (recompute)");
      outputs = fn_(inputs);
    }
    if (preserve_rng_) restore_rng(current);
    // The segment's own backward: parameters inside fn receive their gradients here.
    std::vector<Tensor> roots, grads;
    for (size_t i = 0; i < outputs.size() && i < grad_outputs.size(); ++i) {
      if (grad_outputs[i].defined() && outputs[i].requires_grad()) {
        roots.push_back(outputs[i]);
        grads.push_back(grad_outputs[i]);
      }
    }
    if (!roots.empty()) backward(roots, grads);
    std::vector<Tensor> result;
    for (size_t i = 0; i < inputs.size(); ++i) {
      result.push_back(requires_grad_[i] ? inputs[i].grad() : Tensor());
    }
    return result;
  }

  void release_saved() override {
    for (SavedTensor& s : saved_) s.release();
  }
  std::string name() const override { return "CheckpointFunctionBackward"; }

 private:
  CheckpointFunction fn_;
  bool preserve_rng_;
  std::vector<std::pair<Device, GeneratorState>> rng_;
  AutocastState autocast_;
  std::vector<SavedTensor> saved_;
  std::vector<bool> requires_grad_;
};

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFunction& fn, const std::vector<Tensor>& inputs,
                               bool preserve_rng_state) {
  if (!is_grad_enabled()) return fn(inputs);
  auto rng =
      preserve_rng_state ? capture_rng(inputs) : std::vector<std::pair<Device, GeneratorState>>{};
  const AutocastState autocast = autocast_state();
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;  // nothing inside the segment is saved
    outputs = fn(inputs);
  }
  auto node =
      std::make_shared<CheckpointNode>(fn, inputs, preserve_rng_state, std::move(rng), autocast);
  for (const Tensor& t : inputs) node->next_edges().push_back(gradient_edge(t));
  // The outputs get history even when no input requires grad: parameters inside fn do.
  for (size_t i = 0; i < outputs.size(); ++i) {
    node->output_meta().emplace_back(outputs[i]);
    if (is_floating(outputs[i].dtype())) set_history(outputs[i], static_cast<uint32_t>(i), node);
  }
  return outputs;
}

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  bool preserve_rng_state) {
  auto wrapped = [fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; };
  return checkpoint(wrapped, {input}, preserve_rng_state)[0];
}

Tensor checkpoint_sequential(const std::vector<std::shared_ptr<nn::UnaryModule>>& modules,
                             int64_t segments, const Tensor& input) {
  const auto n = static_cast<int64_t>(modules.size());
  if (segments < 1 || segments > n) {
    throw ValueError(
        fmt::format("[checkpoint_sequential] segments must be in [1, {}], got {}", n, segments),
        "checkpoint_sequential", "segments", fmt::format("{}", segments));
  }
  // The recomputation runs later, in backward: the segment closures own their modules.
  auto run = [&modules](int64_t begin, int64_t end) {
    return [modules, begin, end](const Tensor& x) {
      Tensor h = x;
      for (int64_t i = begin; i < end; ++i) h = (*modules[static_cast<size_t>(i)])(h);
      return h;
    };
  };
  const int64_t size = n / segments;
  Tensor h = input;
  int64_t begin = 0;
  for (int64_t s = 0; s + 1 < segments; ++s, begin += size)
    h = checkpoint(run(begin, begin + size), h);
  return run(begin, n)(h);
}

}  // namespace memgrad::autograd
