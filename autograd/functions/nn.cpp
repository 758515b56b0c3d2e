// nn ops: layer_norm, cross_entropy, dropout. Each saves what PyTorch's kernels save and runs
// its backward as one fused kernel.
#include "autograd/functions/common.h"
#include "autograd/functions/registry.h"
#include "engine/op_support.h"

namespace memgrad::autograd {
namespace {

using Grads = std::vector<Tensor>;

kernels::Operand optional_operand(const Tensor& t) {
  return t.defined() ? detail::operand(t) : kernels::Operand{};
}

// layer_norm saves x, mean, rstd and weight (inputs: x, weight, bias; outputs: y, mean, rstd).
void record_layer_norm(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  auto n = node_for(OpKind::LayerNorm, in, out.subspan(0, 1), a);
  n->save(in[0]);
  n->save(out[1]);
  n->save(out[2]);
  n->save(in[1]);
}

// dx, dweight, dbias from dy in one kernel.
Grads layer_norm_backward(OpNode& n, const Grads& g) {
  const Tensor x = n.unpack(0), mean = n.unpack(1), rstd = n.unpack(2), w = n.unpack(3);
  const Tensor dy = g[0].contiguous();
  const int64_t cols = numel_of(n.attrs().dims);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  Tensor dx = n.needs_grad(0) ? detail::new_tensor(x.sizes(), x.dtype(), x.device()) : Tensor();
  Tensor dw, db;
  if (n.needs_grad(1)) dw = detail::new_tensor(n.input(1).sizes, x.dtype(), x.device());
  if (n.needs_grad(2)) db = detail::new_tensor(n.input(2).sizes, x.dtype(), x.device());
  detail::kernels_for(x.device())
      .layer_norm_backward(optional_operand(dx), optional_operand(dw), optional_operand(db),
                           detail::operand(dy), detail::operand(x), detail::operand(mean),
                           detail::operand(rstd), optional_operand(w), rows, cols);
  return {dx, dw, db};
}

// cross_entropy saves the log-probabilities and the target (inputs: logits, target, log_probs).
void record_cross_entropy(std::span<const Tensor> in, std::span<const Tensor> out,
                          const OpAttrs& a) {
  auto n = node_for(OpKind::CrossEntropy, in, out, a);
  n->save(in[2]);
  n->save(in[1]);
}

// d loss / d logits = scale g (softmax - smoothed one-hot), fused.
Grads cross_entropy_backward(OpNode& n, const Grads& g) {
  const Tensor lp = n.unpack(0), target = n.unpack(1);
  Tensor grad = detail::new_tensor(lp.sizes(), lp.dtype(), lp.device());
  const Tensor gl = g[0].to(lp.dtype()).contiguous();
  detail::kernels_for(lp.device())
      .cross_entropy_backward(detail::operand(grad), detail::operand(gl), detail::operand(lp),
                              detail::operand(target), n.attrs().start, n.attrs().alpha,
                              n.attrs().beta);
  return {grad, Tensor(), Tensor()};
}

// dropout saves its mask (inputs: x, mask).
void record_dropout(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  node_for(OpKind::Dropout, in, out, a)->save(in[1]);
}

// d (x mask scale) = g mask scale
Grads dropout_backward(OpNode& n, const Grads& g) {
  return {mul(g[0], n.unpack(0)) * n.attrs().alpha, Tensor()};
}

}  // namespace

void register_nn_ops() {
  set_op_entry(OpKind::LayerNorm, {record_layer_norm, layer_norm_backward});
  set_op_entry(OpKind::CrossEntropy, {record_cross_entropy, cross_entropy_backward});
  set_op_entry(OpKind::Dropout, {record_dropout, dropout_backward});
}

}  // namespace memgrad::autograd
