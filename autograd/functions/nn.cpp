// nn ops: layer_norm, cross_entropy, dropout. Each saves what PyTorch's kernels save.
// layer_norm and cross_entropy run their backward as one fused kernel each; dropout's is two
// elementwise multiplications, by its saved mask and then by its scale (one temporary of g's
// size).
#include "autograd/functions/common.h"

namespace memgrad::autograd {
namespace {

// ---- layer_norm(x, weight, bias) -> y (mean and rstd are saved, not differentiated):
// dx, dweight, dbias from dy in one kernel ----
struct LayerNorm {
  static constexpr OpKind kind = OpKind::LayerNorm;
  static constexpr uint32_t differentiable_outputs = 1;
  enum Saved { kX, kMean, kRstd, kWeight };
  static void save(OpNode& n, Inputs in, Outputs out) {
    n.save(kX, in[0]);
    n.save(kMean, out[1]);
    n.save(kRstd, out[2]);
    n.save(kWeight, in[1]);
  }
  static Grads backward(OpNode& n, const Grads& g) {
    const bool needs[3] = {n.needs_grad(0), n.needs_grad(1), n.needs_grad(2)};
    const Tensor x = n.unpack(kX), mean = n.unpack(kMean), rstd = n.unpack(kRstd);
    const Tensor weight = n.unpack(kWeight);
    LayerNormGrads d =
        layer_norm_backward(g[0], x, mean, rstd, weight, n.attrs<LayerNormAttrs>().normalized_shape,
                            n.input(1).sizes, needs);
    return {d.x, d.weight, d.bias};
  }
};

// ---- cross_entropy(logits, target, log_probs): d logits = scale g (softmax - smoothed
// one-hot), fused; target and log_probs get no gradient ----
struct CrossEntropy {
  static constexpr OpKind kind = OpKind::CrossEntropy;
  enum Saved { kLogProbs, kTarget };
  static void save(OpNode& n, Inputs in, Outputs) {
    n.save(kLogProbs, in[2]);
    n.save(kTarget, in[1]);
  }
  static Grads backward(OpNode& n, const Grads& g) {
    return {cross_entropy_backward(g[0], n.unpack(kLogProbs), n.unpack(kTarget),
                                   n.attrs<CrossEntropyAttrs>()),
            Tensor(), Tensor()};
  }
};

// ---- dropout(x, mask): d = g mask scale ----
struct Dropout {
  static constexpr OpKind kind = OpKind::Dropout;
  enum Saved { kMask };
  static void save(OpNode& n, Inputs in, Outputs) { n.save(kMask, in[1]); }
  static Grads backward(OpNode& n, const Grads& g) {
    return {mul(g[0], n.unpack(kMask)) * n.attrs<DropoutAttrs>().scale, Tensor()};
  }
};

}  // namespace

void register_nn_ops() {
  register_op<LayerNorm>();
  register_op<CrossEntropy>();
  register_op<Dropout>();
}

}  // namespace memgrad::autograd
