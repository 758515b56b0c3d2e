// Reductions and softmax. sum and mean save nothing and return an expanded (stride-0) view of
// the gradient, so their backward allocates nothing of the input's size; var saves its input;
// std, the full and dim-wise amax/amin, logsumexp and norm their input and result; max/min
// along a dim their indices; softmax and log_softmax only their result, with one fused kernel.
#include <algorithm>
#include <cmath>

#include "autograd/functions/common.h"

namespace memgrad::autograd {
namespace {

// The reduced gradient (or result) with the reduced dims put back as size 1.
Tensor unsqueeze_reduced(const Tensor& t, const ReductionAttrs& r, int ndim) {
  if (r.keepdim || t.dim() == ndim) return t;
  Tensor out = t;
  if (r.dims.empty()) {
    for (int d = 0; d < ndim; ++d) out = out.unsqueeze(d);
    return out;
  }
  Shape sorted = r.dims;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t d : sorted) out = out.unsqueeze(d);
  return out;
}

// How many input elements fold into each result element.
int64_t reduced_count(const OpNode& n, const ReductionAttrs& r) {
  const Shape& sizes = n.input(0).sizes;
  if (r.dims.empty()) return numel_of(sizes);
  int64_t count = 1;
  for (int64_t d : r.dims) count *= sizes[static_cast<int>(d)];
  return count;
}

// ---- sum: d = g expanded to the input (a view: nothing of the input's size) ----
struct Sum {
  static constexpr OpKind kind = OpKind::Sum;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) {
    const Shape& sizes = n.input(0).sizes;
    return {unsqueeze_reduced(g[0], n.attrs<ReductionAttrs>(), sizes.size()).expand(sizes)};
  }
};

// ---- mean: d = g / N expanded to the input ----
struct Mean {
  static constexpr OpKind kind = OpKind::Mean;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) {
    const ReductionAttrs& r = n.attrs<ReductionAttrs>();
    const Shape& sizes = n.input(0).sizes;
    const Tensor scaled = g[0] / static_cast<double>(reduced_count(n, r));
    return {unsqueeze_reduced(scaled, r, sizes.size()).expand(sizes)};
  }
};

// ---- var: d = g 2 (x - mean) / (N - correction);  std: d = g (x - mean) / ((N - c) std) ----
template <OpKind K>
struct Variance {
  static constexpr OpKind kind = K;
  static constexpr bool kIsStd = K == OpKind::Std;
  enum Saved { kX, kResult };
  static void save(OpNode& n, Inputs in, Outputs out) {
    n.save(kX, in[0]);
    if constexpr (kIsStd) n.save_output(kResult, out[0]);
  }
  static Grads backward(OpNode& n, const Grads& g) {
    const Tensor x = n.unpack(kX);
    const VarianceAttrs& a = n.attrs<VarianceAttrs>();
    const ReductionAttrs& r = a.reduction;
    const Tensor result = kIsStd ? unsqueeze_reduced(n.unpack(kResult), r, x.dim()) : Tensor();
    const Tensor mu = x.mean(r.dims.empty() ? Shape() : r.dims, /*keepdim=*/true);
    const double denom = static_cast<double>(reduced_count(n, r) - a.correction);
    const Tensor gk = unsqueeze_reduced(g[0], r, x.dim());
    if constexpr (kIsStd) return {gk * (x - mu) / (result * denom)};
    return {gk * (x - mu) * (2.0 / denom)};
  }
};

// ---- max/min along a dim: the gradient goes to the selected index ----
template <OpKind K>
struct ArgExtremum {
  static constexpr OpKind kind = K;
  enum Saved { kIndices };
  static void save(OpNode& n, Inputs, Outputs out) { n.save(kIndices, out[1]); }
  static Grads backward(OpNode& n, const Grads& g) {
    const ArgReductionAttrs& a = n.attrs<ArgReductionAttrs>();
    Tensor indices = n.unpack(kIndices);
    Tensor grad = g[0];
    if (!a.keepdim) {
      indices = indices.unsqueeze(a.dim);
      grad = grad.unsqueeze(a.dim);
    }
    Tensor out = zeros_for(n.input(0));
    out.scatter_add_(a.dim, indices, grad.contiguous());
    return {out};
  }
};

// ---- full max/min, amax/amin: the gradient is shared evenly among tied extrema (PyTorch) ----
template <OpKind K>
struct EvenlyDistributed {
  static constexpr OpKind kind = K;
  enum Saved { kX, kResult };
  static void save(OpNode& n, Inputs in, Outputs out) {
    n.save(kX, in[0]);
    n.save_output(kResult, out[0]);
  }
  static Grads backward(OpNode& n, const Grads& g) {
    const Tensor x = n.unpack(kX);
    const ReductionAttrs& r = n.attrs<ReductionAttrs>();
    const bool all = K == OpKind::MaxAll || K == OpKind::MinAll || r.dims.empty();
    Tensor result = n.unpack(kResult);
    Tensor gk = g[0];
    if (all) {
      result = result.reshape(Shape::filled(x.dim(), 1));
      gk = gk.reshape(Shape::filled(x.dim(), 1));
    } else {
      result = unsqueeze_reduced(result, r, x.dim());
      gk = unsqueeze_reduced(gk, r, x.dim());
    }
    const Tensor mask = x.eq(result).to(gk.dtype());
    const Tensor count = all ? mask.sum() : mask.sum(r.dims, /*keepdim=*/true);
    return {mask * (gk / count)};
  }
};

// ---- logsumexp: d = g exp(x - result) ----
struct LogSumExp {
  static constexpr OpKind kind = OpKind::LogSumExp;
  enum Saved { kX, kResult };
  static void save(OpNode& n, Inputs in, Outputs out) {
    n.save(kX, in[0]);
    n.save_output(kResult, out[0]);
  }
  static Grads backward(OpNode& n, const Grads& g) {
    const Tensor x = n.unpack(kX);
    const ReductionAttrs& r = n.attrs<ReductionAttrs>();
    const Tensor result = unsqueeze_reduced(n.unpack(kResult), r, x.dim());
    const Tensor gk = unsqueeze_reduced(g[0], r, x.dim());
    return {gk * exp(x - result)};
  }
};

// ---- norm: d ||x||_p = g sign(x) |x|^(p-1) / ||x||^(p-1); p = inf shares g among max |x| ----
struct Norm {
  static constexpr OpKind kind = OpKind::Norm;
  enum Saved { kX, kResult };
  static void save(OpNode& n, Inputs in, Outputs out) {
    n.save(kX, in[0]);
    n.save_output(kResult, out[0]);
  }
  static Grads backward(OpNode& n, const Grads& g) {
    const Tensor x = n.unpack(kX);
    const NormAttrs& a = n.attrs<NormAttrs>();
    const double p = a.p;
    const Tensor result = unsqueeze_reduced(n.unpack(kResult), a.reduction, x.dim());
    const Tensor gk = unsqueeze_reduced(g[0], a.reduction, x.dim());
    if (std::isinf(p)) {
      const Tensor mask = abs(x).eq(result).to(gk.dtype());
      const Shape& dims = a.reduction.dims;
      const Tensor count = dims.empty() ? mask.sum() : mask.sum(dims, /*keepdim=*/true);
      return {sign(x) * mask * (gk / count)};
    }
    const Tensor safe = where(result.eq(0.0), ones_like(result), result);  // 0 norm: 0 gradient
    if (p == 2.0) return {gk * x / safe};
    if (p == 1.0) return {gk * sign(x)};
    return {gk * sign(x) * pow(abs(x), p - 1.0) / pow(safe, p - 1.0)};
  }
};

// ---- softmax: d = y (g - sum(g y));  log_softmax: d = g - exp(y) sum(g), one kernel ----
template <OpKind K>
struct Softmax {
  static constexpr OpKind kind = K;
  enum Saved { kResult };
  static void save(OpNode& n, Inputs, Outputs out) { n.save_output(kResult, out[0]); }
  static Grads backward(OpNode& n, const Grads& g) {
    return {softmax_backward(g[0], n.unpack(kResult), n.attrs<SoftmaxAttrs>().dim,
                             K == OpKind::LogSoftmax)};
  }
};

}  // namespace

void register_reduce_ops() {
  register_op<Sum>();
  register_op<Mean>();
  register_op<Variance<OpKind::Var>>();
  register_op<Variance<OpKind::Std>>();
  register_op<ArgExtremum<OpKind::MaxDim>>();
  register_op<ArgExtremum<OpKind::MinDim>>();
  register_op<EvenlyDistributed<OpKind::MaxAll>>();
  register_op<EvenlyDistributed<OpKind::MinAll>>();
  register_op<EvenlyDistributed<OpKind::Amax>>();
  register_op<EvenlyDistributed<OpKind::Amin>>();
  register_op<LogSumExp>();
  register_op<Norm>();
  register_op<Softmax<OpKind::Softmax>>();
  register_op<Softmax<OpKind::LogSoftmax>>();
}

}  // namespace memgrad::autograd
