// Linear layers.
#include "engine/nn/linear.h"

#include <cmath>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/factories.h"
#include "engine/linalg.h"
#include "engine/nn/init.h"

namespace memgrad::nn {
namespace {

// PyTorch's Linear.reset_parameters: kaiming_uniform_(a=sqrt(5)) for the weight, and
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias.
void reset(Tensor& weight, Tensor& bias, int64_t in) {
  init::kaiming_uniform_(weight, std::sqrt(5.0), in);
  if (bias.defined()) {
    const double bound = in > 0 ? 1.0 / std::sqrt(static_cast<double>(in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, LinearOptions options)
    : in_(in_features), out_(out_features) {
  if (in_features < 0 || out_features < 0) {
    throw ShapeError(
        fmt::format("[Linear] features must be >= 0, got in={} out={}", in_features, out_features),
        "Linear", ShapeRoles::given(Shape{out_features, in_features}));
  }
  const TensorOptions opts = TensorOptions(options.dtype).with_device(options.device);
  weight_ = register_parameter("weight", empty({out_, in_}, opts));
  if (options.bias) bias_ = register_parameter("bias", empty({out_}, opts));
  reset(weight_, bias_, in_);
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight_, bias_); }

std::string Linear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", in_, out_, bias_.defined());
}

LazyLinear::LazyLinear(int64_t out_features, LinearOptions options)
    : out_(out_features), options_(options) {}

Tensor LazyLinear::forward(const Tensor& x) {
  const int64_t in = x.dim() == 0 ? 1 : x.size(-1);
  if (!in_) {
    in_ = in;
    const TensorOptions opts = TensorOptions(options_.dtype).with_device(options_.device);
    weight_ = register_parameter("weight", empty({out_, in}, opts));
    if (options_.bias) bias_ = register_parameter("bias", empty({out_}, opts));
    reset(weight_, bias_, in);
  } else if (*in_ != in) {
    throw ShapeError(fmt::format("[LazyLinear] initialised for in_features={} but got input of "
                                 "shape {}",
                                 *in_, to_string(x.sizes())),
                     "LazyLinear", ShapeRoles::given(x.sizes()));
  }
  return linear(x, weight_, bias_);
}

std::string LazyLinear::extra_repr() const {
  return in_ ? fmt::format("in_features={}, out_features={}", *in_, out_)
             : fmt::format("in_features=<uninitialised>, out_features={}", out_);
}

}  // namespace memgrad::nn
