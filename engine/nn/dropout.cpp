// Dropout: the probability check and nn::dropout with the module's training flag.
#include "engine/nn/dropout.h"

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/nn/functional.h"

namespace memgrad::nn {

Dropout::Dropout(double p) : p_(p) {
  if (!(p >= 0.0 && p <= 1.0)) {
    throw ValueError(fmt::format("[Dropout] probability has to be between 0 and 1, but got {}", p),
                     "Dropout", "p", fmt::format("{}", p));
  }
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p_, is_training()); }

std::string Dropout::extra_repr() const { return fmt::format("p={}", p_); }

}  // namespace memgrad::nn
