// train_charlm_bench: one training step of train_charlm's transformer in memgrad, next to the
// same step in libtorch (bench/peer/train_charlm_peer.cpp; tools/run_bench.py runs both,
// alternating, and prints the ratios). The model is examples/charlm's CharLM, the one the
// example trains, and the loss is its charlm_loss.
//
// The step: train_charlm with its default flags: vocabulary 86 (the default text's), width
// 128, 2 blocks, 4 heads, context 64, batch 32, dropout 0, float32, AdamW (lr 3e-3, betas 0.9
// and 0.999, eps 1e-8, weight decay 0.01), 2 threads; the learning rate stays at 3e-3 (the
// example's warm-up and cosine schedule only set a number between steps). Synthetic data from
// seed 0: a pool of 16 batches, each a randint(0, 86) window of 65 tokens per sequence whose
// first 64 are the input and last 64 the target, cycled. A step is zero_grad (set_to_none) +
// forward + cross-entropy and the next-character accuracy (as charlm_loss computes them) +
// backward + step. 20 warm-up steps, then 200 timed steps, each timed on its own (an untimed
// step follows each of the FMA peak's measurements between them: bench/bench_util.h's
// time_training_steps).
//
//   train_charlm_bench [--quick] [--config]
//
// prints (bench/bench_util.h format) the same figures as train_bench, named charlm_*: median
// and p90 step (ms), the spread of the blocks' median steps, peak allocated and reserved bytes
// (MiB), peak RSS and RSS at startup (MiB), and the loss after the last step (it falls from about
// ln 86 = 4.45 as the pool is memorised), then the step's GEMM FLOPs, the machine's FMA peak
// measured between blocks of the timed steps, the step's FMA-peak bound (bench/fma_peak.h) and its
// products timed alone (bench/step_gemms.h).
#include <omp.h>

#include <cstdio>
#include <vector>

#include "autograd/autograd.h"
#include "bench/bench_shapes.h"
#include "bench/bench_util.h"
#include "bench/fma_peak.h"
#include "bench/memgrad_products.h"
#include "bench/memgrad_same_start.h"
#include "bench/same_start.h"
#include "engine/optim/optimizer.h"
#include "examples/charlm/charlm_model.h"

namespace {

using namespace memgrad;

using namespace bench::charlm;

struct Batch {
  Tensor input;   // kBatch x kContext int64
  Tensor target;  // kBatch x kContext int64: the input shifted by one token
};

// A batch from a kBatch x (kContext + 1) window of tokens: its first kContext columns are the
// input, its last kContext the target.
Batch from_window(const Tensor& window) {
  return {window.narrow(1, 0, kContext).contiguous(), window.narrow(1, 1, kContext).contiguous()};
}

examples::CharLM make_model() {
  return examples::CharLM({kVocab, kWidth, kLayers, kHeads, kContext}, /*dropout=*/0.0,
                          /*checkpoint_segments=*/0, kCPU);
}

optim::AdamW make_optimizer(examples::CharLM& model) {
  return optim::AdamW(model.parameters(), {.lr = 3e-3, .weight_decay = 0.01});
}

// One training step on `batch`, its loss assigned to `loss` before backward (as a training
// loop's `loss = ...` releases the last step's loss there).
void train_step(examples::CharLM& model, optim::AdamW& optimizer, const Batch& batch,
                Tensor& loss) {
  optimizer.zero_grad();
  loss = examples::charlm_loss(model, batch.input, batch.target, /*amp=*/false).loss;
  loss.backward();
  optimizer.step();
}

// The same-start run (bench/same_start.h): a fresh model from the weights and batches both
// libraries draw alike, trained on them; the loss of every step and the weights' norm after.
bench::same_start::Run same_start_run() {
  namespace ss = bench::same_start;
  examples::CharLM model = make_model();
  bench::load_same_start(model, ss::transformer_shapes(kVocab, kWidth, kLayers, kContext));
  std::vector<Batch> pool;
  for (int b = 0; b < ss::kPoolBatches; ++b) {
    pool.push_back(from_window(
        from_vector(ss::integer_values(ss::batch_seed(b), kBatch * (kContext + 1), kVocab),
                    {kBatch, kContext + 1})));
  }
  optim::AdamW optimizer = make_optimizer(model);
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
    pool.push_back(from_window(randint(0, kVocab, {kBatch, kContext + 1})));
  }
  examples::CharLM model = make_model();
  optim::AdamW optimizer = make_optimizer(model);
  Tensor loss;
  bench::StepsAndPeak timed = bench::time_training_steps_and_peak(flags, [&](int s) {
    train_step(model, optimizer, pool[static_cast<size_t>(s % kPoolBatches)], loss);
  });
  bench::report_training(
      "charlm",
      {std::move(timed.step_ms), static_cast<double>(max_memory_allocated(kCPU)) / kMiB,
       static_cast<double>(max_memory_reserved(kCPU)) / kMiB, startup_rss, loss.item<double>()});
  const std::vector<bench::GemmShape> gemms =
      bench::transformer_step_gemms(kVocab, kWidth, kLayers, kHeads, kContext, kBatch);
  bench::report_fma_bound("charlm", bench::gemm_flops(gemms), timed.peak_gflops);
  bench::report("charlm_step_gemms", bench::time_step_gemms(gemms, bench::memgrad_products()),
                "ms");
  bench::same_start::report_run("charlm", same_start_run());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return bench::run_main(argc, argv, "train_charlm_bench", run); }
