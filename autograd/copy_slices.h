// CopySlices: the node a base tensor gets when one of its views is modified in place.
//
// The in-place op rewrote the slice of the base that the view covers. In backward, the base's
// gradient is copied, the slice's part of it is passed through the op's own node (giving the
// gradient for the slice's old value, written back into the copy, and gradients for the op's
// other inputs), and the copy flows on to the base's old history. Allocates in backward: one
// copy of the base's gradient.
#pragma once

#include "autograd/node.h"

namespace memgrad::autograd {

class CopySlices final : public Node {
 public:
  // `base` and `view` are geometries in the same storage; `fn` is the in-place op's node.
  CopySlices(TensorMeta base, TensorMeta view, std::shared_ptr<Node> fn);

  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  void release_saved() override { fn_->release_saved(); }
  std::string name() const override { return "CopySlices"; }

 private:
  TensorMeta base_;
  TensorMeta view_;
  std::shared_ptr<Node> fn_;
};

}  // namespace memgrad::autograd
