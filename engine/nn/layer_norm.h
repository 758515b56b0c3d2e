// LayerNorm: normalisation over the last dims, with a learnt scale and shift.
//
// Memory: with elementwise_affine, the weight and bias (each normalized_shape, float32 on
// `device`) are allocated at construction; without it the layer holds no tensor. forward
// allocates and saves what nn::layer_norm does (functional.h): y, plus a mean and a reciprocal
// standard deviation per normalised row.
#pragma once

#include <string>

#include "engine/nn/module.h"

namespace memgrad::nn {

// Normalises over the last dims (normalized_shape), with a learnt scale (ones) and shift (zeros).
class LayerNorm : public UnaryModule {
 public:
  // Allocates: weight and bias of normalized_shape when elementwise_affine, nothing otherwise.
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     Device device = kCPU);
  // Allocates and saves as nn::layer_norm. Throws ShapeError when x's trailing dims differ from
  // normalized_shape.
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "LayerNorm"; }

 protected:
  std::string extra_repr() const override;

 private:
  Shape shape_;
  double eps_;
  Tensor weight_, bias_;
};

}  // namespace memgrad::nn
