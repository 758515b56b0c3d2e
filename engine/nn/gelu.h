// GELU: the activation x Phi(x) (Phi the standard normal CDF), as a module for Sequential.
//
// Memory: the layer holds no tensor. forward allocates its result and, when autograd records
// it, saves its input for backward (the gelu contract in elementwise.h).
#pragma once

#include <string>

#include "engine/nn/module.h"

namespace memgrad::nn {

// y = x Phi(x) elementwise; tanh_approximation uses PyTorch's tanh formula instead of erf.
class GELU : public UnaryModule {
 public:
  explicit GELU(bool tanh_approximation = false) : tanh_(tanh_approximation) {}
  // Allocates: the result. Saves: the input.
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "GELU"; }

 private:
  bool tanh_;
};

}  // namespace memgrad::nn
