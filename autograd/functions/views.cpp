// Views: backward needs only sizes (and for as_strided, the geometry), so views save nothing.
// Most gradients are views of the incoming gradient (transpose, permute, view); slice, select
// and diagonal write it into zeros of the input's shape (one allocation, as PyTorch).
#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "autograd/error.h"
#include "autograd/functions/common.h"
#include "autograd/functions/registry.h"

namespace memgrad::autograd {
namespace {

using Grads = std::vector<Tensor>;

template <OpKind K>
void record(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  node_for(K, in, out, a);
}

// d view(x) = g reshaped to x (also unsqueeze, squeeze, flatten)
Grads reshape_backward(OpNode& n, const Grads& g) { return {g[0].reshape(n.input(0).sizes)}; }

// d expand(x) = g summed over the expanded dims
Grads expand_backward(OpNode& n, const Grads& g) { return {sum_to(g[0], n.input(0).sizes)}; }

// d x[start::step] = g written into zeros at the slice
Grads slice_backward(OpNode& n, const Grads& g) {
  const OpAttrs& a = n.attrs();
  Tensor out = zeros_for(n.input(0));
  const int64_t len = g[0].size(a.dim);
  out.slice(a.dim, a.start, a.start + len * a.step, a.step).copy_(g[0]);
  return {out};
}

// d x.select(dim, i) = g written into zeros at index i
Grads select_backward(OpNode& n, const Grads& g) {
  Tensor out = zeros_for(n.input(0));
  out.select(n.attrs().dim, n.attrs().start).copy_(g[0]);
  return {out};
}

// d transpose = the same transpose of g
Grads transpose_backward(OpNode& n, const Grads& g) {
  return {g[0].transpose(n.attrs().dim, n.attrs().dim2)};
}

// d permute(x, p) = g permuted by the inverse of p
Grads permute_backward(OpNode& n, const Grads& g) {
  const Shape& p = n.attrs().dims;
  Shape inverse = Shape::filled(p.size(), 0);
  for (int i = 0; i < p.size(); ++i) inverse[static_cast<int>(p[i])] = i;
  return {g[0].permute(inverse)};
}

// d diagonal = g written into zeros on the diagonal
Grads diagonal_backward(OpNode& n, const Grads& g) {
  Tensor out = zeros_for(n.input(0));
  out.diagonal(n.attrs().start, n.attrs().dim, n.attrs().dim2).copy_(g[0]);
  return {out};
}

// Storage positions of every element of a geometry, as an int64 tensor (row-major order).
Tensor positions(const Shape& sizes, const Shape& strides, int64_t offset, Device device) {
  std::vector<int64_t> out(static_cast<size_t>(numel_of(sizes)));
  std::vector<int64_t> idx(static_cast<size_t>(sizes.size()), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t pos = offset;
    for (int d = 0; d < sizes.size(); ++d) pos += idx[static_cast<size_t>(d)] * strides[d];
    out[i] = pos;
    for (int d = sizes.size() - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < sizes[d]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  return from_vector(out, {static_cast<int64_t>(out.size())}).to(device);
}

// d as_strided: scatter-add g into a flat buffer covering both geometries (overlapping output
// elements accumulate), then read the input's elements back out of it.
Grads as_strided_backward(OpNode& n, const Grads& g) {
  const TensorMeta& in = n.input(0);
  const OpAttrs& a = n.attrs();
  const Tensor out_pos = positions(a.sizes, a.strides, a.start, in.device);
  const Tensor in_pos = positions(in.sizes, in.strides, in.storage_offset, in.device);
  if (in_pos.numel() > 0 && in_pos.max().item<int64_t>() >= 0) {
    // An input whose elements overlap would need its gradient divided among them.
    std::vector<int64_t> p = in_pos.cpu().to_vector<int64_t>();
    std::sort(p.begin(), p.end());
    if (std::adjacent_find(p.begin(), p.end()) != p.end()) {
      throw AutogradError("as_strided backward: the input has overlapping memory (e.g. an "
                          "expanded tensor); call .contiguous() on it first");
    }
  }
  int64_t extent = 1;
  if (out_pos.numel() > 0) extent = std::max(extent, out_pos.max().item<int64_t>() + 1);
  if (in_pos.numel() > 0) extent = std::max(extent, in_pos.max().item<int64_t>() + 1);
  Tensor buffer = zeros({extent}, TensorOptions(g[0].dtype()).with_device(in.device));
  buffer.scatter_add_(0, out_pos, g[0].contiguous().reshape({-1}));
  return {buffer.index_select(0, in_pos).reshape(in.sizes)};
}

// detach: no gradient flows.
Grads detach_backward(OpNode&, const Grads&) { return {Tensor()}; }

}  // namespace

void register_view_ops() {
  set_op_entry(OpKind::View, {record<OpKind::View>, reshape_backward});
  set_op_entry(OpKind::Squeeze, {record<OpKind::Squeeze>, reshape_backward});
  set_op_entry(OpKind::Unsqueeze, {record<OpKind::Unsqueeze>, reshape_backward});
  set_op_entry(OpKind::Expand, {record<OpKind::Expand>, expand_backward});
  set_op_entry(OpKind::Slice, {record<OpKind::Slice>, slice_backward});
  set_op_entry(OpKind::Select, {record<OpKind::Select>, select_backward});
  set_op_entry(OpKind::Transpose, {record<OpKind::Transpose>, transpose_backward});
  set_op_entry(OpKind::Permute, {record<OpKind::Permute>, permute_backward});
  set_op_entry(OpKind::Diagonal, {record<OpKind::Diagonal>, diagonal_backward});
  set_op_entry(OpKind::AsStrided, {record<OpKind::AsStrided>, as_strided_backward});
  set_op_entry(OpKind::Detach, {record<OpKind::Detach>, detach_backward});
}

}  // namespace memgrad::autograd
