// Linear and LazyLinear: y = x W^T + b.
//
// Linear(in, out) allocates its weight (out x in) and bias (out) at construction, initialised
// like PyTorch (U(-1/sqrt(in), 1/sqrt(in)) for both). LazyLinear(out) holds no parameter bytes
// until its first forward, which infers `in` from the input's last dimension, then allocates
// and initialises both (with the bias, unlike the buggy lazy layer in seed 002).
#pragma once

#include <optional>

#include "engine/nn/module.h"

namespace memgrad::nn {

struct LinearOptions {
  bool bias = true;
  Device device = kCPU;
  DType dtype = kFloat32;
};

class Linear : public UnaryModule {
 public:
  // Allocates: the weight (out x in) and the bias (out), in options.dtype on options.device.
  Linear(int64_t in_features, int64_t out_features, LinearOptions options = {});

  // linear(x, weight, bias). Allocates: the result (x's leading dims x out_features); a
  // contiguous copy of x first when GEMM cannot read its strides; under autocast the float16
  // casts of x and the parameters (autograd/autocast.h). Aliases: nothing.
  // Saves for backward: x if the weight requires grad, the weight if x requires grad, never the
  // bias (linalg.h). Throws ShapeError when x.size(-1) != in_features.
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Linear"; }

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 protected:
  std::string extra_repr() const override;

 private:
  int64_t in_, out_;
  Tensor weight_;
  Tensor bias_;
};

class LazyLinear : public UnaryModule {
 public:
  explicit LazyLinear(int64_t out_features, LinearOptions options = {});

  // The first call allocates the parameters (in_features = x.size(-1)), then every call
  // allocates and saves as Linear::forward. Later calls require the same in_features
  // (ShapeError otherwise).
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "LazyLinear"; }
  bool initialized() const { return in_.has_value(); }

 protected:
  std::string extra_repr() const override;

 private:
  int64_t out_;
  LinearOptions options_;
  std::optional<int64_t> in_;
  Tensor weight_;  // undefined until the first forward
  Tensor bias_;
};

}  // namespace memgrad::nn
