// The small layers.
#include "engine/nn/layers.h"

#include <fmt/format.h>

#include "engine/elementwise.h"
#include "engine/error.h"
#include "engine/factories.h"
#include "engine/indexing.h"
#include "engine/nn/functional.h"
#include "engine/nn/init.h"

namespace memgrad::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, Device device) {
  weight_ = register_parameter("weight", empty({num_embeddings, embedding_dim}, device));
  init::normal_(weight_);
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight_, indices); }

std::string Embedding::extra_repr() const {
  return fmt::format("{}, {}", weight_.size(0), weight_.size(1));
}

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine, Device device)
    : shape_(normalized_shape), eps_(eps) {
  if (elementwise_affine) {
    weight_ = register_parameter("weight", ones(shape_, device));
    bias_ = register_parameter("bias", zeros(shape_, device));
  }
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, shape_, weight_, bias_, eps_); }

std::string LayerNorm::extra_repr() const {
  return fmt::format("{}, eps={}, elementwise_affine={}", to_string(shape_), eps_,
                     weight_.defined());
}

Dropout::Dropout(double p) : p_(p) {
  if (!(p >= 0.0 && p <= 1.0)) {
    throw ValueError(fmt::format("[Dropout] probability has to be between 0 and 1, but got {}", p));
  }
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p_, is_training()); }

std::string Dropout::extra_repr() const { return fmt::format("p={}", p_); }

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor GELU::forward(const Tensor& x) { return gelu(x, tanh_); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }
Tensor SiLU::forward(const Tensor& x) { return silu(x); }

Sequential::Sequential(std::initializer_list<std::shared_ptr<UnaryModule>> modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<UnaryModule> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& m : modules_) h = m->forward(h);
  return h;
}

}  // namespace memgrad::nn
