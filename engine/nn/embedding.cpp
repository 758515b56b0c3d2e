// Embedding: its weight is one parameter; forward is the embedding op of engine/indexing.
#include "engine/nn/embedding.h"

#include <fmt/format.h>

#include "engine/factories.h"
#include "engine/indexing.h"
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

}  // namespace memgrad::nn
