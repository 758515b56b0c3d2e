// AutogradMeta: the autograd state of one tensor, behind TensorImpl's opaque pointer.
//
// A leaf that requires grad owns its accumulated gradient and (weakly) the AccumulateGrad node
// that writes it. A non-leaf points at the node that produced it (grad_fn) and says which of
// that node's outputs it is. Views of tensors that require grad remember the version at which
// their grad_fn was computed, so a later in-place change of the base rebuilds it (PyTorch's
// lazy view regeneration).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/tensor.h"

namespace memgrad::autograd {

class Node;

// A tensor gradient hook: receives the gradient and may return a replacement (or an undefined
// tensor to keep it).
using GradHook = std::function<Tensor(const Tensor&)>;

}  // namespace memgrad::autograd

namespace memgrad {

struct AutogradMeta {
  Tensor grad;                                     // accumulated gradient (leaves, retain_grad)
  std::shared_ptr<autograd::Node> grad_fn;         // the producing node (non-leaves)
  uint32_t output_nr = 0;                          // which output of grad_fn this tensor is
  bool leaf_requires_grad = false;                 // requires_grad_() on a leaf
  bool retains_grad = false;                       // retain_grad() on a non-leaf
  std::weak_ptr<autograd::Node> grad_accumulator;  // the leaf's AccumulateGrad, if alive
  std::vector<autograd::GradHook> hooks;           // run on the gradient before it is used
  // Leaves: run with the leaf after a gradient was accumulated into `grad`.
  std::vector<std::function<void(const Tensor&)>> post_accumulate_hooks;
  uint32_t view_version = 0;  // views: storage version when grad_fn was set
};

}  // namespace memgrad
