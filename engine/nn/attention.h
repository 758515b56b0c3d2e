// A causal multi-head self-attention block and a pre-norm transformer block (GPT-2 layout).
//
// Memory per forward, for a batch of B sequences of T tokens, width C and H heads (what
// autograd keeps until backward): the attention matrix is B x H x T x T, saved by softmax (its
// output) and by the second matmul, plus the q, k, v projections (3 B T C) and the usual
// Linear/LayerNorm inputs. The T^2 term is why long contexts are memory-hungry.
#pragma once

#include <memory>

#include "engine/nn/layer_norm.h"
#include "engine/nn/linear.h"
#include "engine/nn/sequential.h"

namespace memgrad::nn {

class CausalSelfAttention : public UnaryModule {
 public:
  // Throws ValueError unless embed_dim is a multiple of num_heads. `max_context` sizes the
  // causal mask buffer (bool, max_context^2 bytes).
  CausalSelfAttention(int64_t embed_dim, int64_t num_heads, int64_t max_context,
                      double dropout = 0.0, Device device = kCPU);
  // x (B, T, C) -> (B, T, C). Throws ShapeError for T > max_context or a wrong C.
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "CausalSelfAttention"; }

 protected:
  std::string extra_repr() const override;

 private:
  int64_t embed_dim_, num_heads_, max_context_;
  double dropout_;
  std::shared_ptr<Linear> qkv_, proj_;
  Tensor future_;  // (max_context, max_context) bool: true above the diagonal (masked)
};

// x + attn(ln1(x)), then x + mlp(ln2(x)) with mlp = Linear(C, 4C) -> GELU -> Linear(4C, C).
class TransformerBlock : public UnaryModule {
 public:
  TransformerBlock(int64_t embed_dim, int64_t num_heads, int64_t max_context, double dropout = 0.0,
                   Device device = kCPU);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "TransformerBlock"; }

 private:
  std::shared_ptr<LayerNorm> ln1_, ln2_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<Sequential> mlp_;
};

}  // namespace memgrad::nn
