// ReLU: the activation max(x, 0), as a module for Sequential.
//
// Memory: the layer holds no tensor. forward allocates its result and, when autograd records
// it, saves that output for backward (the relu contract in elementwise.h).
#pragma once

#include <string>

#include "engine/nn/module.h"

namespace memgrad::nn {

// y = max(x, 0) elementwise.
class ReLU : public UnaryModule {
 public:
  // Allocates: the result. Saves: the result.
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "ReLU"; }
};

}  // namespace memgrad::nn
