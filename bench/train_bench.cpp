// train_bench: one training step of an MLP in memgrad, next to the same step in libtorch
// (bench/peer/train_peer.cpp; tools/run_bench.py runs both, alternating, and prints the ratios).
//
// The step (the reference benchmark of docs/performance.md): MLP 784-512-512-10, ReLU,
// cross-entropy, SGD (lr 0.1, momentum 0.9), batch 128, float32, 2 threads; synthetic data from
// seed 0: a pool of 16 batches (randn inputs, randint(0, 10) labels), cycled. A step is
// zero_grad (set_to_none, as in both libraries' current default) + forward + backward + step.
// 20 warm-up steps, then 200 timed steps, each timed on its own (an untimed step follows each of
// the FMA peak's measurements between them: bench/bench_util.h's time_training_steps).
//
//   train_bench [--quick] [--config]
//
// prints (bench/bench_util.h format): the median and p90 step (ms), the spread of the ten
// blocks' median steps (how far the machine's pace moved during the run), the peak of allocated
// bytes (max_memory_allocated, MiB) and reserved bytes, the peak RSS of the process (MiB; RSS
// at startup too, before any tensor) and the loss after the last step (a sanity check: the
// random labels are memorised, so it falls from about 2.3), then the step's GEMM FLOPs, the FMA
// peak of this machine's 2 cores, measured between blocks of the timed steps (bench/fma_peak.h),
// the step's FMA-peak bound: the least time those FLOPs take at that peak, and the step's
// products timed alone (bench/step_gemms.h: what the GEMM library takes for those FLOPs). Timing
// lives here, never in tests.
#include <omp.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "autograd/autograd.h"
#include "bench/bench_mlp.h"
#include "bench/bench_util.h"
#include "bench/fma_peak.h"
#include "bench/memgrad_products.h"
#include "bench/memgrad_same_start.h"
#include "bench/same_start.h"
#include "engine/nn/functional.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"

namespace {

using namespace memgrad;

using bench::Mlp;
constexpr int64_t kBatch = bench::kMlpBatch;  // the global batch
constexpr int64_t kInputs = bench::kMlpInputs;
constexpr int64_t kClasses = bench::kMlpClasses;
constexpr int kPoolBatches = bench::kMlpPoolBatches;

struct Batch {
  Tensor input;   // kBatch x kInputs float32
  Tensor target;  // kBatch int64
};

// One training step on `batch`, its loss assigned to `loss` before backward (as a training
// loop's `loss = ...` releases the last step's loss there).
void train_step(Mlp& model, optim::SGD& optimizer, const Batch& batch, Tensor& loss) {
  optimizer.zero_grad();
  loss = nn::cross_entropy(model.forward(batch.input), batch.target);
  loss.backward();
  optimizer.step();
}

// The same-start run (bench/same_start.h): a fresh model from the weights and batches both
// libraries draw alike, trained on them; the loss of every step and the weights' norm after.
bench::same_start::Run same_start_run() {
  namespace ss = bench::same_start;
  Mlp model;
  bench::load_same_start(model, ss::linear_stack_shapes(bench::kMlpWidths));
  std::vector<Batch> pool;
  for (int b = 0; b < ss::kPoolBatches; ++b) {
    pool.push_back(
        {from_vector(ss::normal_values(ss::batch_seed(b), kBatch * kInputs), {kBatch, kInputs}),
         from_vector(ss::integer_values(ss::batch_seed(b) + 1, kBatch, kClasses), {kBatch})});
  }
  optim::SGD optimizer(model.parameters(), {.lr = 0.1, .momentum = 0.9});
  std::vector<double> losses = ss::losses_over_steps<Tensor>(
      pool, [&](const Batch& batch, Tensor& loss) { train_step(model, optimizer, batch, loss); });
  return {losses, bench::weight_norm(model)};
}

int run(const bench::Flags& flags) {
  const double startup_rss = bench::peak_rss_mib();
  omp_set_num_threads(bench::kThreads);
  bench::print_config("memgrad", bench::kThreads);
  if (flags.config_only) return 0;
  manual_seed(0);
  std::vector<Batch> pool;
  for (int i = 0; i < kPoolBatches; ++i) {
    pool.push_back({randn({kBatch, kInputs}), randint(0, kClasses, {kBatch})});
  }
  Mlp model;
  optim::SGD optimizer(model.parameters(), {.lr = 0.1, .momentum = 0.9});
  Tensor loss;
  bench::StepsAndPeak timed = bench::time_training_steps_and_peak(flags, [&](int s) {
    train_step(model, optimizer, pool[static_cast<size_t>(s % kPoolBatches)], loss);
  });
  bench::report_training(
      "train",
      {std::move(timed.step_ms), static_cast<double>(max_memory_allocated(kCPU)) / kMiB,
       static_cast<double>(max_memory_reserved(kCPU)) / kMiB, startup_rss, loss.item<double>()});
  // The least the step could take here: its GEMM FLOPs at the FMA peak of bench::kThreads cores.
  const std::vector<bench::GemmShape> gemms =
      bench::linear_stack_step_gemms(bench::kMlpWidths, kBatch);
  bench::report_fma_bound("train", bench::gemm_flops(gemms), timed.peak_gflops);
  bench::report("train_step_gemms", bench::time_step_gemms(gemms, bench::memgrad_products()), "ms");
  bench::same_start::report_run("train", same_start_run());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return bench::run_main(argc, argv, "train_bench", run); }
