// Sequential: registration of its children and the forward chain.
#include "engine/nn/sequential.h"

#include <string>
#include <utility>

namespace memgrad::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<UnaryModule>> modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<UnaryModule> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& m : modules_) h = (*m)(h);
  return h;
}

}  // namespace memgrad::nn
