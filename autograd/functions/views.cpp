// Views: backward needs only sizes (and for as_strided, the geometry), so views save nothing.
// Most gradients are views of the incoming gradient (transpose, permute, view); slice, select
// and diagonal write it into zeros of the input's shape (one allocation, as PyTorch); split,
// chunk and unbind are one node for all their pieces, whose gradients cat or stack joins (one
// allocation, plus zeros for each piece that got no gradient, as PyTorch).
#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "autograd/error.h"
#include "autograd/functions/common.h"

namespace memgrad::autograd {
namespace {

// Every view saves nothing: its backward reads only its input's metadata and its attributes.

// ---- view(x) (and squeeze, unsqueeze): d = g reshaped to x ----
template <OpKind K>
struct Reshape {
  static constexpr OpKind kind = K;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) { return {g[0].reshape(n.input(0).sizes)}; }
};

// ---- expand(x): d = g summed over the expanded dims ----
struct Expand {
  static constexpr OpKind kind = OpKind::Expand;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) { return {sum_to(g[0], n.input(0).sizes)}; }
};

// ---- x[start::step]: d = g written into zeros at the slice ----
struct Slice {
  static constexpr OpKind kind = OpKind::Slice;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) {
    const SliceAttrs& a = n.attrs<SliceAttrs>();
    Tensor out = zeros_for(n.input(0));
    const int64_t len = g[0].size(a.dim);
    // The slice's last element + 1 as its end: start + len x step could overflow an int64.
    const int64_t end = len == 0 ? a.start : a.start + (len - 1) * a.step + 1;
    out.slice(a.dim, a.start, end, a.step).copy_(g[0]);
    return {out};
  }
};

// ---- x.select(dim, i): d = g written into zeros at index i ----
struct Select {
  static constexpr OpKind kind = OpKind::Select;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) {
    const SelectAttrs& a = n.attrs<SelectAttrs>();
    Tensor out = zeros_for(n.input(0));
    out.select(a.dim, a.index).copy_(g[0]);
    return {out};
  }
};

// ---- transpose(x, d0, d1): d = the same transpose of g ----
struct Transpose {
  static constexpr OpKind kind = OpKind::Transpose;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) {
    const TransposeAttrs& a = n.attrs<TransposeAttrs>();
    return {g[0].transpose(a.dim0, a.dim1)};
  }
};

// ---- permute(x, p): d = g permuted by the inverse of p ----
struct Permute {
  static constexpr OpKind kind = OpKind::Permute;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) {
    const Shape& p = n.attrs<PermuteAttrs>().dims;
    Shape inverse = Shape::filled(p.size(), 0);
    for (int i = 0; i < p.size(); ++i) inverse[static_cast<int>(p[i])] = i;
    return {g[0].permute(inverse)};
  }
};

// ---- diagonal(x): d = g written into zeros on the diagonal ----
struct Diagonal {
  static constexpr OpKind kind = OpKind::Diagonal;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) {
    const DiagonalAttrs& a = n.attrs<DiagonalAttrs>();
    Tensor out = zeros_for(n.input(0));
    out.diagonal(a.offset, a.dim1, a.dim2).copy_(g[0]);
    return {out};
  }
};

// The gradients of a multi-output view's pieces, in order: zeros of the piece's shape for a
// piece that got none.
std::vector<Tensor> piece_grads(OpNode& n, const Grads& g) {
  const MetaList& pieces = n.output_meta();
  std::vector<Tensor> out;
  out.reserve(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    out.push_back(i < g.size() && g[i].defined() ? g[i] : zeros_for(pieces[i]));
  }
  return out;
}

// ---- split(x), chunk(x): d = the pieces' gradients joined by cat ----
struct Split {
  static constexpr OpKind kind = OpKind::Split;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) {
    return {cat(piece_grads(n, g), n.attrs<SplitAttrs>().dim)};
  }
};

// ---- unbind(x): d = the pieces' gradients joined by stack ----
struct Unbind {
  static constexpr OpKind kind = OpKind::Unbind;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) {
    return {stack(piece_grads(n, g), n.attrs<UnbindAttrs>().dim)};
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

// ---- as_strided(x): d = g scatter-added into a flat buffer covering both geometries
// (overlapping output elements accumulate), then the input's elements read back out of it ----
struct AsStrided {
  static constexpr OpKind kind = OpKind::AsStrided;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) { return {grad(n, g[0])}; }
  static Tensor grad(OpNode& n, const Tensor& g);
};

Tensor AsStrided::grad(OpNode& n, const Tensor& g) {
  const TensorMeta& in = n.input(0);
  const AsStridedAttrs& a = n.attrs<AsStridedAttrs>();
  const Tensor out_pos = positions(a.sizes, a.strides, a.storage_offset, in.device);
  const Tensor in_pos = positions(in.sizes, in.strides, in.storage_offset, in.device);
  if (in_pos.numel() > 0 && in_pos.max().item<int64_t>() >= 0) {
    // An input whose elements overlap would need its gradient divided among them.
    std::vector<int64_t> p = in_pos.cpu().to_vector<int64_t>();
    std::sort(p.begin(), p.end());
    if (std::adjacent_find(p.begin(), p.end()) != p.end()) {
      throw AutogradError(
          "as_strided backward: the input has overlapping memory (e.g. an "
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
  register_op<Reshape<OpKind::View>>();
  register_op<Reshape<OpKind::Squeeze>>();
  register_op<Reshape<OpKind::Unsqueeze>>();
  register_op<Expand>();
  register_op<Slice>();
  register_op<Select>();
  register_op<Transpose>();
  register_op<Permute>();
  register_op<Diagonal>();
  register_op<Split>();
  register_op<Unbind>();
  register_op<AsStrided>();
}

}  // namespace memgrad::autograd
