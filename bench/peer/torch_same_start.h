// bench/same_start.h's initial weights, given to a libtorch model.
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "bench/same_start.h"

namespace bench {

// A tensor of `sizes` holding a copy of `values`.
template <typename T>
torch::Tensor from_values(const std::vector<T>& values, torch::IntArrayRef sizes) {
  return torch::from_blob(const_cast<T*>(values.data()), sizes, torch::TensorOptions().dtype<T>())
      .clone();
}

// Copies the same-start values into `model`'s parameters, checked against `expected` shapes.
inline void load_same_start(torch::nn::Module& model,
                            const std::vector<same_start::Dims>& expected) {
  const auto named = model.named_parameters();
  std::vector<std::pair<std::string, same_start::Dims>> listed;
  for (const auto& item : named) listed.emplace_back(item.key(), item.value().sizes().vec());
  torch::NoGradGuard no_grad;
  same_start::load_parameters(listed, expected, [&](size_t i, const std::vector<float>& values) {
    torch::Tensor p = named[i].value();
    p.copy_(from_values(values, p.sizes()));
  });
}

// The L2 norm of all of `model`'s parameters, summed in float64.
inline double weight_norm(torch::nn::Module& model) {
  double squares = 0.0;
  for (const torch::Tensor& p : model.parameters()) {
    squares += p.to(torch::kFloat64).square().sum().item<double>();
  }
  return std::sqrt(squares);
}

}  // namespace bench
