// Tanh: the activation tanh(x), as a module for Sequential.
//
// Memory: the layer holds no tensor. forward allocates its result and, when autograd records
// it, saves that output for backward (the tanh contract in elementwise.h).
#pragma once

#include <string>

#include "engine/nn/module.h"

namespace memgrad::nn {

// y = tanh(x) elementwise.
class Tanh : public UnaryModule {
 public:
  // Allocates: the result. Saves: the result.
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Tanh"; }
};

}  // namespace memgrad::nn
