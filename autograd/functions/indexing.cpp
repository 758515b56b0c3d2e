// Index ops and joining: each saves its index tensors (and mask), never the data; cat saves
// nothing and returns slices (views) of the incoming gradient.
#include "autograd/functions/common.h"

namespace memgrad::autograd {
namespace {

// ---- index_select(x, dim, i): d = zeros(x) with g added at rows i (duplicates accumulate) ----
struct IndexSelect {
  static constexpr OpKind kind = OpKind::IndexSelect;
  enum Saved { kIndex };
  static void save(OpNode& n, Inputs in, Outputs) { n.save(kIndex, in[1]); }
  static Grads backward(OpNode& n, const Grads& g) {
    const TensorMeta& x = n.input(0);
    return {index_add_into_zeros(x.sizes, x.dtype, x.device, n.attrs<IndexDimAttrs>().dim,
                                 n.unpack(kIndex), g[0]),
            Tensor()};
  }
};

// ---- gather(x, dim, i): d = zeros(x).scatter_add(dim, i, g) ----
struct Gather {
  static constexpr OpKind kind = OpKind::Gather;
  enum Saved { kIndex };
  static void save(OpNode& n, Inputs in, Outputs) { n.save(kIndex, in[1]); }
  static Grads backward(OpNode& n, const Grads& g) {
    Tensor out = zeros_for(n.input(0));
    out.scatter_add_(n.attrs<IndexDimAttrs>().dim, n.unpack(kIndex), g[0].contiguous());
    return {out, Tensor()};
  }
};

// ---- scatter_add(self, dim, i, src): d self = g, d src = g.gather(dim, i) ----
struct ScatterAdd {
  static constexpr OpKind kind = OpKind::ScatterAdd;
  enum Saved { kIndex };
  static void save(OpNode& n, Inputs in, Outputs) { n.save(kIndex, in[1]); }
  static Grads backward(OpNode& n, const Grads& g) {
    Tensor gsrc;
    if (n.needs_grad(2)) gsrc = g[0].gather(n.attrs<IndexDimAttrs>().dim, n.unpack(kIndex));
    return {g[0], Tensor(), gsrc};
  }
};

// ---- embedding(W, i): d W = zeros(W) with the rows of g added at rows i ----
struct Embedding {
  static constexpr OpKind kind = OpKind::Embedding;
  enum Saved { kIndices };
  static void save(OpNode& n, Inputs in, Outputs) { n.save(kIndices, in[1]); }
  static Grads backward(OpNode& n, const Grads& g) {
    const TensorMeta& w = n.input(0);
    const Tensor index = n.unpack(kIndices).reshape({-1});
    const Tensor rows = g[0].reshape({-1, w.sizes[1]});
    return {index_add_into_zeros(w.sizes, w.dtype, w.device, 0, index, rows), Tensor()};
  }
};

// ---- masked_fill(x, m, v): d = g with zeros where m ----
struct MaskedFill {
  static constexpr OpKind kind = OpKind::MaskedFill;
  enum Saved { kMask };
  static void save(OpNode& n, Inputs in, Outputs) { n.save(kMask, in[1]); }
  static Grads backward(OpNode& n, const Grads& g) {
    return {g[0].masked_fill(n.unpack(kMask), 0.0), Tensor()};
  }
};

// ---- cat: d = slices of g along dim (views: no allocation) ----
struct Cat {
  static constexpr OpKind kind = OpKind::Cat;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) {
    const CatAttrs& a = n.attrs<CatAttrs>();
    Grads out;
    int64_t start = 0;
    for (size_t i = 0; i < a.sizes_along_dim.size(); ++i) {
      const int64_t len = a.sizes_along_dim[i];
      out.push_back(n.needs_grad(i) ? g[0].narrow(a.dim, start, len) : Tensor());
      start += len;
    }
    return out;
  }
};

// ---- pad(x, p): d = g cropped by -p ----
struct Pad {
  static constexpr OpKind kind = OpKind::Pad;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) {
    std::vector<int64_t> crop;
    for (int64_t p : n.attrs<PadAttrs>().padding) crop.push_back(-p);
    return {pad(g[0], crop)};
  }
};

}  // namespace

void register_indexing_ops() {
  register_op<IndexSelect>();
  register_op<Gather>();
  register_op<ScatterAdd>();
  register_op<Embedding>();
  register_op<MaskedFill>();
  register_op<Cat>();
  register_op<Pad>();
}

}  // namespace memgrad::autograd
