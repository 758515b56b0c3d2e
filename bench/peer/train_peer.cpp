// train_peer: bench/train_bench.cpp in libtorch (PyTorch 1.13's C++ API), the same model, data
// recipe, optimizer, step and output names; see train_bench.cpp for the definitions. libtorch's
// CPU allocator keeps no statistics, so the peak of allocated bytes is printed as n/a.
//
//   train_peer [--quick] [--config]
//
// Run it in the peer's best configuration (tools/run_bench.py sets it; docs/performance.md says
// why): OpenMP OpenBLAS through LD_LIBRARY_PATH, glibc malloc tunables, OPENBLAS_CORETYPE where
// OpenBLAS misdetects the CPU; 2 threads are set here.
#include <torch/torch.h>

#include <cstdio>
#include <vector>

#include "bench/bench_shapes.h"
#include "bench/bench_util.h"
#include "bench/fma_peak.h"
#include "bench/peer/torch_products.h"
#include "bench/peer/torch_same_start.h"
#include "bench/same_start.h"

namespace {

constexpr int64_t kBatch = bench::kMlpBatch;
constexpr int64_t kInputs = bench::kMlpInputs;
constexpr int64_t kHidden = bench::kMlpHidden;
constexpr int64_t kClasses = bench::kMlpClasses;
constexpr int kPoolBatches = bench::kMlpPoolBatches;

struct MlpImpl : torch::nn::Module {
  MlpImpl()
      : fc1(register_module("fc1", torch::nn::Linear(kInputs, kHidden))),
        fc2(register_module("fc2", torch::nn::Linear(kHidden, kHidden))),
        fc3(register_module("fc3", torch::nn::Linear(kHidden, kClasses))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
  }
  torch::nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(Mlp);

struct Batch {
  torch::Tensor input;
  torch::Tensor target;
};

void train_step(Mlp& model, torch::optim::SGD& optimizer, const Batch& batch, torch::Tensor& loss) {
  model->zero_grad(/*set_to_none=*/true);
  loss = torch::nn::functional::cross_entropy(model->forward(batch.input), batch.target);
  loss.backward();
  optimizer.step();
}

bench::same_start::Run same_start_run() {
  namespace ss = bench::same_start;
  Mlp model;
  bench::load_same_start(*model, ss::linear_stack_shapes(bench::kMlpWidths));
  std::vector<Batch> pool;
  for (int b = 0; b < ss::kPoolBatches; ++b) {
    pool.push_back({bench::from_values(ss::normal_values(ss::batch_seed(b), kBatch * kInputs),
                                       {kBatch, kInputs}),
                    bench::from_values(ss::integer_values(ss::batch_seed(b) + 1, kBatch, kClasses),
                                       {kBatch})});
  }
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  std::vector<double> losses = ss::losses_over_steps<torch::Tensor>(
      pool,
      [&](const Batch& batch, torch::Tensor& loss) { train_step(model, optimizer, batch, loss); });
  return {losses, bench::weight_norm(*model)};
}

int run(const bench::Flags& flags) {
  const double startup_rss = bench::peak_rss_mib();
  torch::set_num_threads(bench::kThreads);
  bench::print_config("libtorch " TORCH_VERSION, torch::get_num_threads());
  if (flags.config_only) return 0;
  torch::manual_seed(0);
  std::vector<Batch> pool;
  for (int i = 0; i < kPoolBatches; ++i) {
    pool.push_back({torch::randn({kBatch, kInputs}), torch::randint(0, kClasses, {kBatch})});
  }
  Mlp model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::Tensor loss;
  bench::StepsAndPeak timed = bench::time_training_steps_and_peak(flags, [&](int s) {
    train_step(model, optimizer, pool[static_cast<size_t>(s % kPoolBatches)], loss);
  });
  bench::report_training("train", {std::move(timed.step_ms), std::nullopt, std::nullopt,
                                   startup_rss, loss.item<double>()});
  const std::vector<bench::GemmShape> gemms =
      bench::linear_stack_step_gemms(bench::kMlpWidths, kBatch);
  bench::report_fma_bound("train", bench::gemm_flops(gemms), timed.peak_gflops);
  bench::report("train_step_gemms", bench::time_step_gemms(gemms, bench::torch_products()), "ms");
  bench::same_start::report_run("train", same_start_run());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return bench::run_main(argc, argv, "train_peer", run); }
