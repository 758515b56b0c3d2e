// Matrix products: each saves the operand the other side's gradient needs (PyTorch's rule).
// Gradients use transposed views, so backward allocates only the gradients themselves.
#include "autograd/functions/common.h"
#include "autograd/functions/registry.h"

namespace memgrad::autograd {
namespace {

using Grads = std::vector<Tensor>;

// Saves input 0 if input 1 needs a gradient and input 1 if input 0 does (indices 0 and 1).
template <OpKind K>
void record_pair(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  auto n = node_for(K, in, out, a);
  n->save(n->needs_grad(1) ? in[0] : Tensor());
  n->save(n->needs_grad(0) ? in[1] : Tensor());
}

// d(a @ b) = (g b^T, a^T g) for (n, k) @ (k, m), batched for bmm.
Grads mm_backward(OpNode& n, const Grads& g) {
  Tensor ga, gb;
  if (n.needs_grad(0)) ga = matmul(g[0], n.unpack(1).mT());
  if (n.needs_grad(1)) gb = matmul(n.unpack(0).mT(), g[0]);
  return {ga, gb};
}

// matmul with 1-d operands and broadcast batch dims: promote to matrices, differentiate,
// sum the broadcast dims away, demote.
Grads matmul_backward(OpNode& n, const Grads& g) {
  const TensorMeta& ma = n.input(0);
  const TensorMeta& mb = n.input(1);
  const bool a_vec = ma.sizes.size() == 1, b_vec = mb.sizes.size() == 1;
  Tensor ga, gb;
  if (a_vec && b_vec) {  // dot product
    if (n.needs_grad(0)) ga = g[0] * n.unpack(1);
    if (n.needs_grad(1)) gb = g[0] * n.unpack(0);
    return {ga, gb};
  }
  Tensor grad = g[0];
  if (a_vec) grad = grad.unsqueeze(-2);
  if (b_vec) grad = grad.unsqueeze(-1);
  if (n.needs_grad(0)) {
    Tensor b = n.unpack(1);
    if (b_vec) b = b.unsqueeze(-1);
    Shape target = ma.sizes;
    if (a_vec) target.insert(0, 1);
    ga = sum_to(matmul(grad, b.mT()), target);
    if (a_vec) ga = ga.squeeze(0);
  }
  if (n.needs_grad(1)) {
    Tensor a = n.unpack(0);
    if (a_vec) a = a.unsqueeze(0);
    Shape target = mb.sizes;
    if (b_vec) target.push_back(1);
    gb = sum_to(matmul(a.mT(), grad), target);
    if (b_vec) gb = gb.squeeze(-1);
  }
  return {ga, gb};
}

// addmm(bias, a, b) = beta bias + alpha a @ b: saves a and b as mm does (indices 0, 1 below
// refer to a and b).
void record_addmm(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  auto n = node_for(OpKind::Addmm, in, out, a);
  n->save(n->needs_grad(2) ? in[1] : Tensor());
  n->save(n->needs_grad(1) ? in[2] : Tensor());
}

// d = (beta g summed to bias, alpha g b^T, alpha a^T g)
Grads addmm_backward(OpNode& n, const Grads& g) {
  const double alpha = n.attrs().alpha, beta = n.attrs().beta;
  Tensor gbias, ga, gb;
  if (n.needs_grad(0)) gbias = sum_to(beta == 1.0 ? g[0] : g[0] * beta, n.input(0).sizes);
  const Tensor scaled = alpha == 1.0 ? g[0] : g[0] * alpha;
  if (n.needs_grad(1)) ga = mm(scaled, n.unpack(1).t());
  if (n.needs_grad(2)) gb = mm(n.unpack(0).t(), scaled);
  return {gbias, ga, gb};
}

// linear(x, W, b) = x W^T + b for x (..., in), W (out, in): saves x (for W's gradient) and W
// (for x's).
void record_linear(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  auto n = node_for(OpKind::Linear, in, out, a);
  n->save(n->needs_grad(1) ? in[0] : Tensor());
  n->save(n->needs_grad(0) ? in[1] : Tensor());
}

// d = (g W, g^T x over all leading dims, g summed over all leading dims)
Grads linear_backward(OpNode& n, const Grads& g) {
  const Tensor& grad = g[0];
  const int64_t out = grad.size(-1);
  Tensor gx, gw, gbias;
  if (n.needs_grad(0)) gx = matmul(grad, n.unpack(1));
  if (n.needs_grad(1) || n.needs_grad(2)) {
    const Tensor g2 = grad.reshape({-1, out});
    if (n.needs_grad(1)) {
      const Tensor x = n.unpack(0);
      gw = mm(g2.t(), x.reshape({-1, x.size(-1)}));
    }
    if (n.needs_grad(2)) gbias = g2.sum({0});
  }
  return {gx, gw, gbias};
}

}  // namespace

void register_linalg_ops() {
  set_op_entry(OpKind::Mm, {record_pair<OpKind::Mm>, mm_backward, false, true});
  set_op_entry(OpKind::Bmm, {record_pair<OpKind::Bmm>, mm_backward, false, true});
  set_op_entry(OpKind::Matmul, {record_pair<OpKind::Matmul>, matmul_backward, false, true});
  set_op_entry(OpKind::Addmm, {record_addmm, addmm_backward});
  set_op_entry(OpKind::Linear, {record_linear, linear_backward});
}

}  // namespace memgrad::autograd
