// AccumulateGrad: run the leaf's hooks, then adopt, copy or add the gradient.
#include "autograd/accumulate_grad.h"

#include "autograd/grad_mode.h"
#include "engine/storage.h"

namespace memgrad::autograd {

// kLeafSequenceNr: a leaf's node outlives the graph that made it (the leaf keeps it while the
// graph, or a hook, holds it), so its creation order says nothing about when its gradient is
// ready. Run first among the ready nodes, it hands each gradient to the post-accumulate hooks as
// soon as backward has it: DDP's first bucket starts while the earlier layers still compute.
AccumulateGrad::AccumulateGrad(Tensor leaf) : Node(kLeafSequenceNr), leaf_(std::move(leaf)) {
  output_meta().emplace_back(leaf_);
  // A parameter's gradient belongs to the parameter's module, wherever it is first used.
  if (*leaf_.storage().trace_module() != '\0') set_module(leaf_.storage().trace_module());
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grad_outputs) {
  Tensor grad = std::move(grad_outputs.at(0));
  if (!grad.defined()) return {};
  AutogradMeta* meta = leaf_.impl()->autograd_meta();
  for (const GradHook& hook : meta->hooks) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = std::move(replaced);
  }
  NoGradGuard no_grad;
  if (!meta->grad.defined()) {
    // Adopt the buffer when this is its only reference and its layout is the leaf's (dense and
    // contiguous); otherwise a contiguous copy.
    const bool owned =
        grad.impl_ptr().use_count() == 1 && grad.impl()->storage_ptr().use_count() == 1;
    meta->grad = owned && grad.is_contiguous() && grad.storage_offset() == 0 ? grad : grad.clone();
  } else {
    meta->grad.add_(grad);
  }
  grad = Tensor();  // the arriving gradient is released before the hooks run
  for (const auto& hook : meta->post_accumulate_hooks) hook(leaf_);
  return {};
}

}  // namespace memgrad::autograd
