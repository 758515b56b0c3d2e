// Views: backward needs only sizes (and for as_strided, the geometry), so views save nothing.
// Most gradients are views of the incoming gradient (transpose, permute, view); slice, select
// and diagonal write it into zeros of the input's shape (one allocation, as PyTorch).
#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "autograd/error.h"
#include "autograd/functions/common.h"

namespace memgrad::autograd {
namespace {

// Views need nothing beyond their input's metadata and their attributes.
template <OpKind K, class Formula>
struct ViewOp {
  static constexpr OpKind kind = K;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) { return {Formula::grad(n, g[0])}; }
};

// d view(x) = g reshaped to x (also squeeze, unsqueeze, flatten)
struct Reshaped {
  static Tensor grad(OpNode& n, const Tensor& g) { return g.reshape(n.input(0).sizes); }
};

// d expand(x) = g summed over the expanded dims
struct Unexpanded {
  static Tensor grad(OpNode& n, const Tensor& g) { return sum_to(g, n.input(0).sizes); }
};

// d x[start::step] = g written into zeros at the slice
struct IntoSlice {
  static Tensor grad(OpNode& n, const Tensor& g) {
    const SliceAttrs& a = n.attrs<SliceAttrs>();
    Tensor out = zeros_for(n.input(0));
    const int64_t len = g.size(a.dim);
    out.slice(a.dim, a.start, a.start + len * a.step, a.step).copy_(g);
    return out;
  }
};

// d x.select(dim, i) = g written into zeros at index i
struct IntoSelect {
  static Tensor grad(OpNode& n, const Tensor& g) {
    const SelectAttrs& a = n.attrs<SelectAttrs>();
    Tensor out = zeros_for(n.input(0));
    out.select(a.dim, a.index).copy_(g);
    return out;
  }
};

// d transpose = the same transpose of g
struct Transposed {
  static Tensor grad(OpNode& n, const Tensor& g) {
    const TransposeAttrs& a = n.attrs<TransposeAttrs>();
    return g.transpose(a.dim0, a.dim1);
  }
};

// d permute(x, p) = g permuted by the inverse of p
struct InversePermuted {
  static Tensor grad(OpNode& n, const Tensor& g) {
    const Shape& p = n.attrs<PermuteAttrs>().dims;
    Shape inverse = Shape::filled(p.size(), 0);
    for (int i = 0; i < p.size(); ++i) inverse[static_cast<int>(p[i])] = i;
    return g.permute(inverse);
  }
};

// d diagonal = g written into zeros on the diagonal
struct IntoDiagonal {
  static Tensor grad(OpNode& n, const Tensor& g) {
    const DiagonalAttrs& a = n.attrs<DiagonalAttrs>();
    Tensor out = zeros_for(n.input(0));
    out.diagonal(a.offset, a.dim1, a.dim2).copy_(g);
    return out;
  }
};

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
struct FromStrided {
  static Tensor grad(OpNode& n, const Tensor& g);
};

Tensor FromStrided::grad(OpNode& n, const Tensor& g) {
  const TensorMeta& in = n.input(0);
  const AsStridedAttrs& a = n.attrs<AsStridedAttrs>();
  const Tensor out_pos = positions(a.sizes, a.strides, a.storage_offset, in.device);
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
  Tensor buffer = zeros({extent}, TensorOptions(g.dtype()).with_device(in.device));
  buffer.scatter_add_(0, out_pos, g.contiguous().reshape({-1}));
  return buffer.index_select(0, in_pos).reshape(in.sizes);
}

}  // namespace

void register_view_ops() {
  register_op<ViewOp<OpKind::View, Reshaped>>();
  register_op<ViewOp<OpKind::Squeeze, Reshaped>>();
  register_op<ViewOp<OpKind::Unsqueeze, Reshaped>>();
  register_op<ViewOp<OpKind::Expand, Unexpanded>>();
  register_op<ViewOp<OpKind::Slice, IntoSlice>>();
  register_op<ViewOp<OpKind::Select, IntoSelect>>();
  register_op<ViewOp<OpKind::Transpose, Transposed>>();
  register_op<ViewOp<OpKind::Permute, InversePermuted>>();
  register_op<ViewOp<OpKind::Diagonal, IntoDiagonal>>();
  register_op<ViewOp<OpKind::AsStrided, FromStrided>>();
}

}  // namespace memgrad::autograd
