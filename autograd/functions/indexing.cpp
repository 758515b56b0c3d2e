// Index ops and joining: each saves its index tensors (and mask), never the data; cat saves
// nothing and returns slices (views) of the incoming gradient.
#include "autograd/functions/common.h"
#include "autograd/functions/registry.h"
#include "engine/op_support.h"

namespace memgrad::autograd {
namespace {

using Grads = std::vector<Tensor>;

template <OpKind K>
void record_nothing(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  node_for(K, in, out, a);
}

// Saves input 1 (the index or the mask).
template <OpKind K>
void record_second(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  node_for(K, in, out, a)->save(in[1]);
}

// grad_in = zeros(input) with g added at the selected indices along dim.
Tensor index_add_into_zeros(const TensorMeta& input, int64_t dim, const Tensor& index,
                            const Tensor& g) {
  Tensor out = zeros_for(input);
  const int d = wrap_dim(dim, input.sizes.size(), "index_select");
  detail::kernels_for(out.device())
      .index_add(detail::operand(out), detail::operand(index), detail::operand(g.contiguous()), d);
  return out;
}

// d x.index_select(dim, i) = zeros with g added at rows i (duplicates accumulate)
Grads index_select_backward(OpNode& n, const Grads& g) {
  return {index_add_into_zeros(n.input(0), n.attrs().dim, n.unpack(0), g[0]), Tensor()};
}

// d x.gather(dim, i) = zeros.scatter_add(dim, i, g)
Grads gather_backward(OpNode& n, const Grads& g) {
  Tensor out = zeros_for(n.input(0));
  out.scatter_add_(n.attrs().dim, n.unpack(0), g[0].contiguous());
  return {out, Tensor()};
}

// scatter_add(self, dim, i, src): d self = g, d src = g.gather(dim, i). Saves the index.
void record_scatter_add(std::span<const Tensor> in, std::span<const Tensor> out,
                        const OpAttrs& a) {
  node_for(OpKind::ScatterAdd, in, out, a)->save(in[1]);
}

Grads scatter_add_backward(OpNode& n, const Grads& g) {
  Tensor gsrc;
  if (n.needs_grad(2)) gsrc = g[0].gather(n.attrs().dim, n.unpack(0));
  return {g[0], Tensor(), gsrc};
}

// d embedding(W, i) = zeros(W) with rows of g added at rows i
Grads embedding_backward(OpNode& n, const Grads& g) {
  const Tensor index = n.unpack(0).reshape({-1});
  const int64_t dim = n.input(0).sizes[1];
  return {index_add_into_zeros(n.input(0), 0, index, g[0].reshape({-1, dim})), Tensor()};
}

// d masked_fill(x, m, v) = g with zeros where m
Grads masked_fill_backward(OpNode& n, const Grads& g) {
  return {g[0].masked_fill(n.unpack(0), 0.0), Tensor()};
}

// d cat = slices of g (views: no allocation)
Grads cat_backward(OpNode& n, const Grads& g) {
  Grads out;
  int64_t start = 0;
  for (size_t i = 0; i < n.attrs().split.size(); ++i) {
    const int64_t len = n.attrs().split[i];
    out.push_back(n.needs_grad(i) ? g[0].narrow(n.attrs().dim, start, len) : Tensor());
    start += len;
  }
  return out;
}

// d pad(x, p) = g cropped by -p
Grads pad_backward(OpNode& n, const Grads& g) {
  std::vector<int64_t> crop;
  for (int64_t p : n.attrs().split) crop.push_back(-p);
  return {pad(g[0], crop)};
}

}  // namespace

void register_indexing_ops() {
  set_op_entry(OpKind::IndexSelect, {record_second<OpKind::IndexSelect>, index_select_backward});
  set_op_entry(OpKind::Gather, {record_second<OpKind::Gather>, gather_backward});
  set_op_entry(OpKind::ScatterAdd, {record_scatter_add, scatter_add_backward});
  set_op_entry(OpKind::Embedding, {record_second<OpKind::Embedding>, embedding_backward});
  set_op_entry(OpKind::MaskedFill, {record_second<OpKind::MaskedFill>, masked_fill_backward});
  set_op_entry(OpKind::Cat, {record_nothing<OpKind::Cat>, cat_backward});
  set_op_entry(OpKind::Pad, {record_nothing<OpKind::Pad>, pad_backward});
}

}  // namespace memgrad::autograd
