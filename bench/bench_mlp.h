// The reference MLP of the benchmarks (docs/performance.md): 784-512-512-10 with ReLU, batch 128
// (the global batch, for the data-parallel runs), drawn from a pool of 16 synthetic batches; its
// sizes are bench/bench_shapes.h's. train_bench times its step against libtorch
// (bench/peer/train_peer.cpp builds the same model in libtorch); dist_bench times the same step in
// one process and under DDP, so both measure one model defined once.
#pragma once

#include <memory>
#include <string>

#include "bench/bench_shapes.h"
#include "engine/nn/linear.h"

namespace bench {

class Mlp : public memgrad::nn::UnaryModule {
 public:
  Mlp()
      : fc1_(register_module("fc1", std::make_shared<memgrad::nn::Linear>(kMlpInputs, kMlpHidden))),
        fc2_(register_module("fc2", std::make_shared<memgrad::nn::Linear>(kMlpHidden, kMlpHidden))),
        fc3_(register_module("fc3",
                             std::make_shared<memgrad::nn::Linear>(kMlpHidden, kMlpClasses))) {}
  memgrad::Tensor forward(const memgrad::Tensor& x) override {
    return (*fc3_)((*fc2_)((*fc1_)(x).relu()).relu());
  }
  std::string name() const override { return "Mlp"; }

 private:
  std::shared_ptr<memgrad::nn::Linear> fc1_, fc2_, fc3_;
};

}  // namespace bench
