// CopySlices backward: copy the base gradient, run the op's node on the view's slice of it.
#include "autograd/copy_slices.h"

#include "engine/memgrad.h"

namespace memgrad::autograd {

CopySlices::CopySlices(TensorMeta base, TensorMeta view, std::shared_ptr<Node> fn)
    : base_(std::move(base)), view_(std::move(view)), fn_(std::move(fn)) {}

std::vector<Tensor> CopySlices::apply(std::vector<Tensor>&& grad_outputs) {
  const Tensor& grad = grad_outputs.at(0);
  // The base is contiguous from offset 0 (checked when recording), so the view's geometry
  // addresses the same elements of a contiguous copy of the gradient.
  Tensor result = grad.contiguous().clone();
  Tensor slice = result.as_strided(view_.sizes, view_.strides, view_.storage_offset);
  std::vector<Tensor> res = fn_->apply({slice.clone()});
  if (!res.empty() && res[0].defined()) {
    slice.copy_(res[0]);
  } else {
    slice.zero_();
  }
  std::vector<Tensor> out = {result};
  for (size_t i = 1; i < res.size(); ++i) out.push_back(res[i]);
  out.resize(next_edges().size());
  return out;
}

}  // namespace memgrad::autograd
