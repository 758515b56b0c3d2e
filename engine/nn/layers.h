// The small layers: Embedding, LayerNorm, Dropout, the activations, Sequential.
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "engine/nn/module.h"

namespace memgrad::nn {

// A lookup table (num_embeddings x embedding_dim), initialised N(0, 1) like PyTorch.
class Embedding : public UnaryModule {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, Device device = kCPU);
  // indices (int64, any shape) -> (*indices.shape, embedding_dim). Saves: the indices.
  Tensor forward(const Tensor& indices) override;
  std::string name() const override { return "Embedding"; }
  const Tensor& weight() const { return weight_; }

 protected:
  std::string extra_repr() const override;

 private:
  Tensor weight_;
};

// Normalises over the last dims (normalized_shape), with a learnt scale (ones) and shift (zeros).
class LayerNorm : public UnaryModule {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     Device device = kCPU);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "LayerNorm"; }

 protected:
  std::string extra_repr() const override;

 private:
  Shape shape_;
  double eps_;
  Tensor weight_, bias_;
};

// Zeroes elements with probability p in training mode (using the device's generator).
class Dropout : public UnaryModule {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Dropout"; }

 protected:
  std::string extra_repr() const override;

 private:
  double p_;
};

class ReLU : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "ReLU"; }
};

class GELU : public UnaryModule {
 public:
  explicit GELU(bool tanh_approximation = false) : tanh_(tanh_approximation) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "GELU"; }

 private:
  bool tanh_;
};

class Tanh : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Tanh"; }
};

class SiLU : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "SiLU"; }
};

// Runs its modules in order; they are named "0", "1", ... as in PyTorch.
class Sequential : public UnaryModule {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<UnaryModule>> modules);
  void push_back(std::shared_ptr<UnaryModule> module);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Sequential"; }
  size_t size() const { return modules_.size(); }
  const std::shared_ptr<UnaryModule>& operator[](size_t i) const { return modules_.at(i); }

 private:
  std::vector<std::shared_ptr<UnaryModule>> modules_;
};

}  // namespace memgrad::nn
