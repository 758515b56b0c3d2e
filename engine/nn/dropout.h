// Dropout: zeroes elements at random in training mode, passes its input through in eval mode.
//
// Memory: the layer holds no tensor. In training, forward allocates the result and a bool mask
// (1 byte per element) and saves the mask for backward; in eval it returns its input and
// allocates nothing (nn::dropout in functional.h).
#pragma once

#include <string>

#include "engine/nn/module.h"

namespace memgrad::nn {

// Zeroes elements with probability p in training mode (using the device's generator).
class Dropout : public UnaryModule {
 public:
  // Throws ValueError for p outside [0, 1].
  explicit Dropout(double p = 0.5);
  // Allocates: the result and the mask in training; nothing in eval (returns x). Saves: the mask.
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Dropout"; }

 protected:
  std::string extra_repr() const override;

 private:
  double p_;
};

}  // namespace memgrad::nn
