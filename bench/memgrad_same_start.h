// bench/same_start.h's initial weights, given to a memgrad model.
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "bench/same_start.h"
#include "engine/factories.h"
#include "engine/nn/module.h"

namespace bench {

// Copies the same-start values into `model`'s parameters, checked against `expected` shapes.
inline void load_same_start(memgrad::nn::Module& model,
                            const std::vector<same_start::Dims>& expected) {
  std::vector<std::pair<std::string, memgrad::Tensor>> named = model.named_parameters();
  std::vector<std::pair<std::string, same_start::Dims>> listed;
  for (const auto& [name, p] : named) listed.emplace_back(name, p.sizes().vec());
  memgrad::NoGradGuard no_grad;
  same_start::load_parameters(listed, expected, [&](size_t i, const std::vector<float>& values) {
    memgrad::Tensor& p = named[i].second;
    p.copy_(memgrad::from_vector(values, p.sizes()));
  });
}

// The L2 norm of all of `model`'s parameters, summed in float64.
inline double weight_norm(memgrad::nn::Module& model) {
  double squares = 0.0;
  for (const memgrad::Tensor& p : model.parameters()) {
    squares += p.to(memgrad::kFloat64).square().sum().item<double>();
  }
  return std::sqrt(squares);
}

}  // namespace bench
