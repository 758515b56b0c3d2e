// LayerNorm: two optional parameters around nn::layer_norm.
#include "engine/nn/layer_norm.h"

#include <fmt/format.h>

#include "engine/factories.h"
#include "engine/nn/functional.h"

namespace memgrad::nn {

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine, Device device)
    : shape_(normalized_shape), eps_(eps) {
  if (elementwise_affine) {
    weight_ = register_parameter("weight", ones(shape_, device));
    bias_ = register_parameter("bias", zeros(shape_, device));
  }
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, shape_, weight_, bias_, eps_); }

std::string LayerNorm::extra_repr() const {
  return fmt::format("{}, eps={}, elementwise_affine={}", to_string(shape_), eps_,
                     weight_.defined());
}

}  // namespace memgrad::nn
