// SiLU: the activation x sigmoid(x), as a module for Sequential.
//
// Memory: the layer holds no tensor. forward allocates its result and, when autograd records
// it, saves its input for backward (the silu contract in elementwise.h).
#pragma once

#include <string>

#include "engine/nn/module.h"

namespace memgrad::nn {

// y = x sigmoid(x) elementwise.
class SiLU : public UnaryModule {
 public:
  // Allocates: the result. Saves: the input.
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "SiLU"; }
};

}  // namespace memgrad::nn
