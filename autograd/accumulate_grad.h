// AccumulateGrad: the node at the end of every path to a leaf that requires grad.
//
// It writes the arriving gradient into leaf.grad: the first gradient is adopted without a copy
// when nothing else holds it and it is contiguous (PyTorch's "steal"), otherwise copied; later
// gradients are added in place (no allocation), which is how gradient accumulation across
// backward calls costs nothing beyond the .grad tensor itself. Then the leaf's post-accumulate
// hooks run (Tensor::register_post_accumulate_grad_hook): the gradient is ready there, which is
// where data-parallel training starts to reduce it.
#pragma once

#include "autograd/node.h"

namespace memgrad::autograd {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf);

  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  std::string name() const override { return "AccumulateGrad"; }
  const Tensor& leaf() const { return leaf_; }

 private:
  Tensor leaf_;
};

}  // namespace memgrad::autograd
