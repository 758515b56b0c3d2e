// Reductions and softmax. sum and mean save nothing and return an expanded (stride-0) view of
// the gradient, so their backward allocates nothing of the input's size; softmax and
// log_softmax save only their output and run one fused kernel.
#include <algorithm>
#include <cmath>

#include "autograd/functions/common.h"
#include "autograd/functions/registry.h"
#include "engine/op_support.h"

namespace memgrad::autograd {
namespace {

using Grads = std::vector<Tensor>;

// The reduced gradient (or result) with the reduced dims put back as size 1.
Tensor unsqueeze_reduced(const Tensor& t, const OpAttrs& a, int ndim) {
  if (a.flag || t.dim() == ndim) return t;
  Tensor out = t;
  if (a.dims.empty()) {
    for (int d = 0; d < ndim; ++d) out = out.unsqueeze(d);
    return out;
  }
  Shape sorted = a.dims;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t d : sorted) out = out.unsqueeze(d);
  return out;
}

int64_t reduced_count(const OpNode& n) {
  const Shape& sizes = n.input(0).sizes;
  if (n.attrs().dims.empty()) return numel_of(sizes);
  int64_t count = 1;
  for (int64_t d : n.attrs().dims) count *= sizes[static_cast<int>(d)];
  return count;
}

template <OpKind K>
void record_nothing(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  node_for(K, in, out, a);
}

template <OpKind K>
void record_input(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  node_for(K, in, out, a)->save(in[0]);
}

template <OpKind K>
void record_input_output(std::span<const Tensor> in, std::span<const Tensor> out,
                         const OpAttrs& a) {
  auto n = node_for(K, in, out, a);
  n->save(in[0]);
  n->save(out[0], /*is_output=*/true);
}

template <OpKind K>
void record_output(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  node_for(K, in, out, a)->save(out[0], /*is_output=*/true);
}

// max/min along a dim save the indices (output 1).
template <OpKind K>
void record_indices(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  node_for(K, in, out, a)->save(out[1]);
}

// d sum = g expanded to the input
Grads sum_backward(OpNode& n, const Grads& g) {
  const int ndim = n.input(0).sizes.size();
  return {unsqueeze_reduced(g[0], n.attrs(), ndim).expand(n.input(0).sizes)};
}

// d mean = g / N expanded to the input
Grads mean_backward(OpNode& n, const Grads& g) {
  const int ndim = n.input(0).sizes.size();
  const Tensor scaled = g[0] / static_cast<double>(reduced_count(n));
  return {unsqueeze_reduced(scaled, n.attrs(), ndim).expand(n.input(0).sizes)};
}

// d var = g 2 (x - mean) / (N - correction)
Grads var_backward(OpNode& n, const Grads& g) {
  const Tensor x = n.unpack(0);
  const OpAttrs& a = n.attrs();
  const Tensor mu = x.mean(a.dims.empty() ? Shape() : a.dims, /*keepdim=*/true);
  const double denom = static_cast<double>(reduced_count(n) - a.correction);
  const Tensor gk = unsqueeze_reduced(g[0], a, x.dim());
  return {gk * (x - mu) * (2.0 / denom)};
}

// d std = g (x - mean) / ((N - correction) std)
Grads std_backward(OpNode& n, const Grads& g) {
  const Tensor x = n.unpack(0);
  const OpAttrs& a = n.attrs();
  const Tensor result = unsqueeze_reduced(n.unpack(1), a, x.dim());
  const Tensor mu = x.mean(a.dims.empty() ? Shape() : a.dims, /*keepdim=*/true);
  const double denom = static_cast<double>(reduced_count(n) - a.correction);
  const Tensor gk = unsqueeze_reduced(g[0], a, x.dim());
  return {gk * (x - mu) / (result * denom)};
}

// max/min along a dim: the gradient goes to the selected index.
Grads select_backward(OpNode& n, const Grads& g) {
  Tensor indices = n.unpack(0);
  Tensor grad = g[0];
  if (!n.attrs().flag) {
    indices = indices.unsqueeze(n.attrs().dim);
    grad = grad.unsqueeze(n.attrs().dim);
  }
  Tensor out = zeros_for(n.input(0));
  out.scatter_add_(n.attrs().dim, indices, grad.contiguous());
  return {out};
}

// Full max/min, amax/amin: the gradient is shared evenly among the tied maxima (PyTorch).
Grads evenly_distribute_backward(OpNode& n, const Grads& g) {
  const Tensor x = n.unpack(0);
  const OpAttrs& a = n.attrs();
  const bool all = n.kind() == OpKind::MaxAll || n.kind() == OpKind::MinAll || a.dims.empty();
  Tensor result = n.unpack(1);
  Tensor gk = g[0];
  if (all) {
    result = result.reshape(Shape::filled(x.dim(), 1));
    gk = gk.reshape(Shape::filled(x.dim(), 1));
  } else {
    result = unsqueeze_reduced(result, a, x.dim());
    gk = unsqueeze_reduced(gk, a, x.dim());
  }
  const Tensor mask = x.eq(result).to(gk.dtype());
  const Tensor count = all ? mask.sum() : mask.sum(a.dims, /*keepdim=*/true);
  return {mask * (gk / count)};
}

// d logsumexp = g exp(x - result)
Grads logsumexp_backward(OpNode& n, const Grads& g) {
  const Tensor x = n.unpack(0);
  const Tensor result = unsqueeze_reduced(n.unpack(1), n.attrs(), x.dim());
  const Tensor gk = unsqueeze_reduced(g[0], n.attrs(), x.dim());
  return {gk * exp(x - result)};
}

// d ||x||_p = g sign(x) |x|^(p-1) / ||x||^(p-1); p = inf shares g among the max |x|.
Grads norm_backward(OpNode& n, const Grads& g) {
  const Tensor x = n.unpack(0);
  const double p = n.attrs().alpha;
  const Tensor result = unsqueeze_reduced(n.unpack(1), n.attrs(), x.dim());
  const Tensor gk = unsqueeze_reduced(g[0], n.attrs(), x.dim());
  if (std::isinf(p)) {
    const Tensor mask = abs(x).eq(result).to(gk.dtype());
    const Tensor count = n.attrs().dims.empty() ? mask.sum() : mask.sum(n.attrs().dims, true);
    return {sign(x) * mask * (gk / count)};
  }
  const Tensor safe = where(result.eq(0.0), ones_like(result), result);  // 0 norm: 0 gradient
  if (p == 2.0) return {gk * x / safe};
  if (p == 1.0) return {gk * sign(x)};
  return {gk * sign(x) * pow(abs(x), p - 1.0) / pow(safe, p - 1.0)};
}

// Softmax and log_softmax: one kernel from the saved output.
template <bool kLog>
Grads softmax_backward(OpNode& n, const Grads& g) {
  const Tensor y = n.unpack(0);
  const Tensor grad = g[0].contiguous();
  Tensor out = detail::new_tensor(y.sizes(), y.dtype(), y.device());
  const int dim = wrap_dim(n.attrs().dim, y.dim(), kLog ? "log_softmax" : "softmax");
  detail::kernels_for(y.device())
      .softmax_backward(detail::operand(out), detail::operand(grad), detail::operand(y), dim, kLog);
  return {out};
}

}  // namespace

void register_reduce_ops() {
  set_op_entry(OpKind::Sum, {record_nothing<OpKind::Sum>, sum_backward});
  set_op_entry(OpKind::Mean, {record_nothing<OpKind::Mean>, mean_backward});
  set_op_entry(OpKind::Var, {record_input<OpKind::Var>, var_backward});
  set_op_entry(OpKind::Std, {record_input_output<OpKind::Std>, std_backward});
  set_op_entry(OpKind::MaxDim, {record_indices<OpKind::MaxDim>, select_backward});
  set_op_entry(OpKind::MinDim, {record_indices<OpKind::MinDim>, select_backward});
  set_op_entry(OpKind::MaxAll, {record_input_output<OpKind::MaxAll>, evenly_distribute_backward});
  set_op_entry(OpKind::MinAll, {record_input_output<OpKind::MinAll>, evenly_distribute_backward});
  set_op_entry(OpKind::Amax, {record_input_output<OpKind::Amax>, evenly_distribute_backward});
  set_op_entry(OpKind::Amin, {record_input_output<OpKind::Amin>, evenly_distribute_backward});
  set_op_entry(OpKind::LogSumExp, {record_input_output<OpKind::LogSumExp>, logsumexp_backward});
  set_op_entry(OpKind::Norm, {record_input_output<OpKind::Norm>, norm_backward});
  set_op_entry(OpKind::Softmax, {record_output<OpKind::Softmax>, softmax_backward<false>});
  set_op_entry(OpKind::LogSoftmax, {record_output<OpKind::LogSoftmax>, softmax_backward<true>});
}

}  // namespace memgrad::autograd
