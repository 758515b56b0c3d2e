// Shared formula helpers.
#include "autograd/functions/common.h"

namespace memgrad::autograd {

Tensor sum_to(const Tensor& grad, const Shape& sizes) {
  if (grad.sizes() == sizes) return grad;
  // Leading dims that broadcasting added, and dims where the input had size 1.
  const int lead = grad.dim() - sizes.size();
  Shape dims;
  for (int d = 0; d < grad.dim(); ++d) {
    if (d < lead || (sizes[d - lead] == 1 && grad.size(d) != 1)) dims.push_back(d);
  }
  Tensor reduced = dims.empty() ? grad : grad.sum(dims, /*keepdim=*/true);
  if (lead > 0) {
    // Drop the leading (now size-1) dims.
    Shape keep;
    for (int d = lead; d < reduced.dim(); ++d) keep.push_back(reduced.size(d));
    reduced = reduced.reshape(keep.empty() ? sizes : keep);
  }
  return reduced.reshape(sizes);
}

Tensor zeros_for(const TensorMeta& meta) {
  return zeros(meta.sizes, TensorOptions(meta.dtype).with_device(meta.device));
}

}  // namespace memgrad::autograd
