// Attention and transformer blocks from engine ops (autograd records each of them).
#include "engine/nn/attention.h"

#include <cmath>

#include <fmt/format.h>

#include "engine/elementwise.h"
#include "engine/error.h"
#include "engine/factories.h"
#include "engine/indexing.h"
#include "engine/linalg.h"
#include "engine/nn/dropout.h"
#include "engine/nn/functional.h"
#include "engine/nn/gelu.h"
#include "engine/reduce.h"

namespace memgrad::nn {

CausalSelfAttention::CausalSelfAttention(int64_t embed_dim, int64_t num_heads, int64_t max_context,
                                         double dropout, Device device)
    : embed_dim_(embed_dim), num_heads_(num_heads), max_context_(max_context), dropout_(dropout) {
  if (num_heads <= 0 || embed_dim % num_heads != 0) {
    throw ValueError(fmt::format("[CausalSelfAttention] embed_dim {} must be a multiple of "
                                 "num_heads {}",
                                 embed_dim, num_heads),
                     "CausalSelfAttention", "embed_dim", fmt::format("{}", embed_dim));
  }
  const LinearOptions o{true, device, kFloat32};
  qkv_ = register_module("qkv", std::make_shared<Linear>(embed_dim, 3 * embed_dim, o));
  proj_ = register_module("proj", std::make_shared<Linear>(embed_dim, embed_dim, o));
  // Position j is in the future of position i when j > i.
  const Tensor pos = arange(max_context, TensorOptions(kInt64).with_device(device));
  future_ = register_buffer("future", gt(pos.unsqueeze(0), pos.unsqueeze(1)));
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  if (x.dim() != 3 || x.size(2) != embed_dim_ || x.size(1) > max_context_) {
    throw ShapeError(fmt::format("[CausalSelfAttention] expected (B, T <= {}, {}), got {}",
                                 max_context_, embed_dim_, to_string(x.sizes())),
                     "CausalSelfAttention", ShapeRoles::given(x.sizes()));
  }
  const int64_t B = x.size(0), T = x.size(1), C = embed_dim_, H = num_heads_, D = C / H;
  const std::vector<Tensor> qkv = (*qkv_)(x).split(C, 2);  // 3 x (B, T, C)
  // (B, T, C) -> (B, H, T, D)
  auto heads = [&](const Tensor& t) { return t.view({B, T, H, D}).transpose(1, 2); };
  const Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  Tensor att = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));
  att = masked_fill(att, future_.slice(0, 0, T).slice(1, 0, T), -INFINITY);
  att = dropout(softmax(att, -1), dropout_, is_training());
  const Tensor y = matmul(att, v).transpose(1, 2).contiguous().view({B, T, C});
  return dropout((*proj_)(y), dropout_, is_training());
}

std::string CausalSelfAttention::extra_repr() const {
  return fmt::format("embed_dim={}, num_heads={}, max_context={}", embed_dim_, num_heads_,
                     max_context_);
}

TransformerBlock::TransformerBlock(int64_t embed_dim, int64_t num_heads, int64_t max_context,
                                   double dropout, Device device) {
  ln1_ = register_module("ln1", std::make_shared<LayerNorm>(Shape{embed_dim}, 1e-5, true, device));
  attn_ = register_module("attn", std::make_shared<CausalSelfAttention>(
                                      embed_dim, num_heads, max_context, dropout, device));
  ln2_ = register_module("ln2", std::make_shared<LayerNorm>(Shape{embed_dim}, 1e-5, true, device));
  const LinearOptions o{true, device, kFloat32};
  mlp_ = register_module("mlp", std::make_shared<Sequential>());
  mlp_->push_back(std::make_shared<Linear>(embed_dim, 4 * embed_dim, o));
  mlp_->push_back(std::make_shared<GELU>(true));
  mlp_->push_back(std::make_shared<Linear>(4 * embed_dim, embed_dim, o));
  mlp_->push_back(std::make_shared<Dropout>(dropout));
}

Tensor TransformerBlock::forward(const Tensor& x) {
  const Tensor h = x + (*attn_)((*ln1_)(x));
  return h + (*mlp_)((*ln2_)(h));
}

}  // namespace memgrad::nn
