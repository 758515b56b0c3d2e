// Embedding: a lookup table of num_embeddings rows of embedding_dim values.
//
// Memory: the weight (num_embeddings x embedding_dim, float32 on `device`) is allocated at
// construction; forward gathers rows into a new tensor of indices.numel() x embedding_dim and
// keeps the indices for backward, whose gradient for the weight is as large as the weight.
#pragma once

#include <cstdint>
#include <string>

#include "engine/nn/module.h"

namespace memgrad::nn {

// A lookup table (num_embeddings x embedding_dim), initialised N(0, 1) like PyTorch.
class Embedding : public UnaryModule {
 public:
  // Allocates: the weight, num_embeddings x embedding_dim x 4 bytes on `device`.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, Device device = kCPU);
  // indices (int64, any shape) -> (*indices.shape, embedding_dim). Allocates: the result.
  // Saves: the indices.
  Tensor forward(const Tensor& indices) override;
  std::string name() const override { return "Embedding"; }
  const Tensor& weight() const { return weight_; }

 protected:
  std::string extra_repr() const override;

 private:
  Tensor weight_;
};

}  // namespace memgrad::nn
