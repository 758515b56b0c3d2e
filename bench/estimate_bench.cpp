// estimate_bench: what knowing a step's memory without running it costs. One AdamW training
// step of a GPT-2 XL-shaped CharLM (width 1600, 25 heads, context 1024, batch 1, float32; the
// vocabulary of train_charlm's default text, 86) on an 80 GiB meta device (docs/estimate.md):
// model construction, forward with the loss, backward, the optimizer step and zero_grad, at 12,
// 24 and 48 blocks, so the time's scaling with depth shows. Then the 48-block step under ZeRO-3
// on 64 ranks (a global batch of 64, one sequence per rank), every rank estimated in turn, each
// alone on a fresh meta device with a meta process group (collectives as NCCL's). No peer:
// PyTorch has no allocator-exact estimate to compare with (docs/estimate.md says why).
//
//   estimate_bench [--quick] [--config]
//
// prints (bench/bench_util.h format), per depth L: estimate_L<L>_time (s), its peak allocated
// and reserved bytes (GiB, exact: the same as a real run on an 80 GiB device); for ZeRO-3 the
// time of all 64 ranks and the largest rank's peaks; then the peak RSS of the process (MiB),
// with the targets: the 48-block step, and all 64 ranks of its ZeRO-3 step, each under 10 s, the
// process under 500 MiB of host memory. --quick: 12 and 48 blocks only, and ZeRO-3 on 8 ranks.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "bench/bench_util.h"
#include "distributed/process_group.h"
#include "distributed/zero_data_parallel.h"
#include "engine/memgrad.h"
#include "engine/optim/optimizer.h"
#include "examples/charlm/charlm_model.h"

namespace {

using namespace memgrad;

constexpr int64_t kVocab = 86;
constexpr int64_t kWidth = 1600;
constexpr int64_t kHeads = 25;
constexpr int64_t kContext = 1024;
constexpr int64_t kBatch = 1;
constexpr size_t kCapacity = size_t{80} << 30;
constexpr double kMaxSeconds = 10.0;
constexpr double kMaxRssMiB = 500.0;

struct Estimate {
  double seconds = 0;
  size_t peak_allocated = 0;
  size_t peak_reserved = 0;
};

// One training step of `layers` blocks on meta:index, from an empty device.
Estimate estimate_step(int index, int64_t layers) {
  const Device meta(DeviceType::Meta, index);
  set_meta_capacity(index, kCapacity);  // a fresh allocator: the figures are this step's
  const bench::Clock::time_point start = bench::Clock::now();
  {
    examples::CharLM model({kVocab, kWidth, layers, kHeads, kContext}, 0.0, 0, meta);
    optim::AdamW optimizer(model.parameters(), optim::AdamOptions{.weight_decay = 0.01});
    const TensorOptions tokens = TensorOptions(kInt64).with_device(meta);
    const Tensor input = randint(0, kVocab, {kBatch, kContext}, tokens);
    const Tensor target = randint(0, kVocab, {kBatch, kContext}, tokens);
    examples::charlm_loss(model, input, target, false).loss.backward();
    optimizer.step();
    optimizer.zero_grad();
  }
  Estimate e;
  e.seconds = bench::seconds_since(start);
  e.peak_allocated = max_memory_allocated(meta);
  e.peak_reserved = max_memory_reserved(meta);
  return e;
}

// The ZeRO-3 step of `layers` blocks on `ranks` ranks: each rank in turn on a fresh meta:index
// with its meta process group; the time of all of them and the largest peaks of any rank.
Estimate estimate_zero3(int index, int64_t layers, int ranks) {
  const Device meta(DeviceType::Meta, index);
  const bench::Clock::time_point start = bench::Clock::now();
  Estimate e;
  for (int rank = 0; rank < ranks; ++rank) {
    set_meta_capacity(index, kCapacity);
    {
      auto model = std::make_shared<examples::CharLM>(
          examples::CharLMShape{kVocab, kWidth, layers, kHeads, kContext}, 0.0, 0, meta);
      auto pg = distributed::init_process_group(distributed::Backend::Nccl, rank, ranks,
                                                std::nullopt, {}, -1, meta);
      distributed::ZeroDataParallel zero(model, pg, distributed::ZeroOptions{3});
      optim::AdamW optimizer(zero.shard_parameters(), optim::AdamOptions{.weight_decay = 0.01});
      const TensorOptions tokens = TensorOptions(kInt64).with_device(meta);
      const Tensor input = randint(0, kVocab, {kBatch, kContext}, tokens);
      const Tensor target = randint(0, kVocab, {kBatch, kContext}, tokens);
      examples::charlm_loss(*model, input, target, false).loss.backward();
      zero.step(optimizer);
      optimizer.zero_grad();
      zero.zero_grad();
    }
    e.peak_allocated = std::max(e.peak_allocated, max_memory_allocated(meta));
    e.peak_reserved = std::max(e.peak_reserved, max_memory_reserved(meta));
  }
  e.seconds = bench::seconds_since(start);
  return e;
}

void report_estimate(const std::string& name, const Estimate& e) {
  bench::report((name + "_time").c_str(), e.seconds, "s");
  bench::report((name + "_peak_allocated").c_str(),
                static_cast<double>(e.peak_allocated) / (1 << 30), "GiB");
  bench::report((name + "_peak_reserved").c_str(), static_cast<double>(e.peak_reserved) / (1 << 30),
                "GiB");
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, "estimate_bench", [](const bench::Flags& flags) {
    bench::print_config("memgrad, meta:N devices", bench::kThreads);
    if (flags.config_only) return 0;
    const std::vector<int64_t> depths =
        flags.quick ? std::vector<int64_t>{12, 48} : std::vector<int64_t>{12, 24, 48};
    Estimate deepest;
    for (size_t i = 0; i < depths.size(); ++i) {
      deepest = estimate_step(static_cast<int>(i), depths[i]);
      report_estimate(fmt::format("estimate_L{}", depths[i]), deepest);
    }
    const int ranks = flags.quick ? 8 : 64;
    const std::string zero_name = fmt::format("estimate_L48_zero3_{}ranks", ranks);
    const Estimate zero = estimate_zero3(static_cast<int>(depths.size()), 48, ranks);
    report_estimate(zero_name, zero);
    bench::report((zero_name + "_per_rank_time").c_str(), zero.seconds / ranks, "s");
    const double rss = bench::peak_rss_mib();
    bench::report("estimate_peak_rss", rss, "MiB");
    const bool fast = deepest.seconds <= kMaxSeconds && zero.seconds <= kMaxSeconds;
    const bool small = rss <= kMaxRssMiB;
    std::printf("target estimate_L48_time <= %.0f s: %s\n", kMaxSeconds,
                deepest.seconds <= kMaxSeconds ? "PASS" : "FAIL");
    std::printf("target %s_time <= %.0f s: %s\n", zero_name.c_str(), kMaxSeconds,
                zero.seconds <= kMaxSeconds ? "PASS" : "FAIL");
    std::printf("target estimate_peak_rss <= %.0f MiB: %s\n", kMaxRssMiB, small ? "PASS" : "FAIL");
    return fast && small ? 0 : 1;
  });
}
