// Matrix products: each saves the operand the other side's gradient needs (PyTorch's rule).
// Gradients use transposed views, so backward allocates only the gradients themselves.
#include "autograd/functions/common.h"

namespace memgrad::autograd {
namespace {

// ---- mm, bmm: d(a @ b) = (g b^T, a^T g) for (n, k) @ (k, m), batched for bmm ----
template <OpKind K>
struct MatrixProduct {
  static constexpr OpKind kind = K;
  static constexpr ReadsSelf reads_self = ReadsSelf::ForOtherGrads;
  enum Saved { kA, kB };
  // Each operand only when the other needs a gradient.
  static void save(OpNode& n, Inputs in, Outputs) {
    if (n.needs_grad(1)) n.save(kA, in[0]);
    if (n.needs_grad(0)) n.save(kB, in[1]);
  }
  static Grads backward(OpNode& n, const Grads& g) {
    Tensor ga, gb;
    if (n.needs_grad(0)) ga = matmul(g[0], n.unpack(kB).mT());
    if (n.needs_grad(1)) gb = matmul(n.unpack(kA).mT(), g[0]);
    return {ga, gb};
  }
};

// ---- matmul: 1-d operands promoted to matrices, differentiated as mm, broadcast batch dims
// summed away, then demoted ----
struct Matmul {
  static constexpr OpKind kind = OpKind::Matmul;
  static constexpr ReadsSelf reads_self = ReadsSelf::ForOtherGrads;
  enum Saved { kA, kB };
  static void save(OpNode& n, Inputs in, Outputs) {
    if (n.needs_grad(1)) n.save(kA, in[0]);
    if (n.needs_grad(0)) n.save(kB, in[1]);
  }
  static Grads backward(OpNode& n, const Grads& g) {
    const TensorMeta& ma = n.input(0);
    const TensorMeta& mb = n.input(1);
    const bool a_vec = ma.sizes.size() == 1, b_vec = mb.sizes.size() == 1;
    Tensor ga, gb;
    if (a_vec && b_vec) {  // dot product
      if (n.needs_grad(0)) ga = g[0] * n.unpack(kB);
      if (n.needs_grad(1)) gb = g[0] * n.unpack(kA);
      return {ga, gb};
    }
    Tensor grad = g[0];
    if (a_vec) grad = grad.unsqueeze(-2);
    if (b_vec) grad = grad.unsqueeze(-1);
    if (n.needs_grad(0)) {
      Tensor b = n.unpack(kB);
      if (b_vec) b = b.unsqueeze(-1);
      Shape target = ma.sizes;
      if (a_vec) target.insert(0, 1);
      ga = sum_to(matmul(grad, b.mT()), target);
      if (a_vec) ga = ga.squeeze(0);
    }
    if (n.needs_grad(1)) {
      Tensor a = n.unpack(kA);
      if (a_vec) a = a.unsqueeze(0);
      Shape target = mb.sizes;
      if (b_vec) target.push_back(1);
      gb = sum_to(matmul(a.mT(), grad), target);
      if (b_vec) gb = gb.squeeze(-1);
    }
    return {ga, gb};
  }
};

// ---- addmm(bias, a, b) = beta bias + alpha a @ b:
// d = (beta g summed to bias, alpha g b^T, alpha a^T g) ----
struct Addmm {
  static constexpr OpKind kind = OpKind::Addmm;
  enum Saved { kA, kB };
  // a and b as mm saves them (the bias is never read).
  static void save(OpNode& n, Inputs in, Outputs) {
    if (n.needs_grad(2)) n.save(kA, in[1]);
    if (n.needs_grad(1)) n.save(kB, in[2]);
  }
  static Grads backward(OpNode& n, const Grads& g) {
    const AddmmAttrs& a = n.attrs<AddmmAttrs>();
    Tensor gbias, ga, gb;
    if (n.needs_grad(0)) gbias = sum_to(a.beta == 1.0 ? g[0] : g[0] * a.beta, n.input(0).sizes);
    const Tensor scaled = a.alpha == 1.0 ? g[0] : g[0] * a.alpha;
    if (n.needs_grad(1)) ga = mm(scaled, n.unpack(kB).t());
    if (n.needs_grad(2)) gb = mm(n.unpack(kA).t(), scaled);
    return {gbias, ga, gb};
  }
};

// ---- linear(x, W, b) = x W^T + b for x (..., in), W (out, in):
// d = (g W, g^T x over all leading dims, g summed over all leading dims) ----
struct Linear {
  static constexpr OpKind kind = OpKind::Linear;
  enum Saved { kX, kWeight };
  // x only for W's gradient, W only for x's; the bias is never read.
  static void save(OpNode& n, Inputs in, Outputs) {
    if (n.needs_grad(1)) n.save(kX, in[0]);
    if (n.needs_grad(0)) n.save(kWeight, in[1]);
  }
  static Grads backward(OpNode& n, const Grads& g) {
    const std::array<bool, 3> needs{n.needs_grad(0), n.needs_grad(1), n.needs_grad(2)};
    // Both unpacked before either product, as PyTorch's nodes do (the weight first).
    const Tensor weight = needs[0] ? n.unpack(kWeight) : Tensor();
    const Tensor x = needs[1] ? n.unpack(kX) : Tensor();
    const std::array<Tensor, 3> grads = linear_backward(g[0], x, weight, needs);
    return {grads[0], grads[1], grads[2]};
  }
};

}  // namespace

void register_linalg_ops() {
  register_op<MatrixProduct<OpKind::Mm>>();
  register_op<MatrixProduct<OpKind::Bmm>>();
  register_op<Matmul>();
  register_op<Addmm>();
  register_op<Linear>();
}

}  // namespace memgrad::autograd
