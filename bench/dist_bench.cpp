// dist_bench: what data parallelism costs and gains on this machine, measured in one run.
//
//   1. all_reduce of 64 MiB (16 Mi float32, sum) on 2 CPU ranks over Gloo on loopback: the median
//      time of one call, the algorithm bandwidth (nbytes / time) and the bus bandwidth
//      (algbw x 2 (N - 1) / N, the bytes each rank's link carries per second in a ring, as
//      nccl-tests defines it; equal to algbw for N = 2), in GB/s (10^9 bytes).
//   2. the training step of bench/train_bench's MLP (784-512-512-10, ReLU, cross-entropy, SGD lr
//      0.1 momentum 0.9, global batch 128, float32, synthetic data from seed 0) in one process
//      against DistributedDataParallel on 2 ranks, each with its 64 rows of the same global batch.
//      The two use the same cores: one process runs 2 OpenMP threads, each of the 2 ranks 1
//      (bench::kThreads in all); one process on 1 thread is measured too (what each rank would
//      take without communicating, for twice the rows). A step is zero_grad + forward + backward
//      (with DDP's bucket all-reduces) + step; rank 0's steps are timed, each on its own.
//      ddp_2rank_speedup is one process on 2 threads over DDP's step; ddp_2rank_scaling one
//      process on 1 thread over it (2 would be perfect scaling). DDP runs as configured by
//      default (a first bucket of 1 MiB, then 25 MiB ones, reduced on the communication thread
//      while backward goes on where the host has a core for each rank's communication thread,
//      else each in the hook that completes it: a config line says which), again with the
//      overlap forced on (mlp_step_2rank_ddp_overlap_*) and again blocking in one 25 MiB bucket
//      reduced in backward's last hook (mlp_step_2rank_ddp_blocking_*), so the effects of the
//      overlap and of the second bucket are measured in the same run;
//      then ZeRO-3 on the same 2 ranks (mlp_step_2rank_zero3_*: each layer's parameters
//      all-gathered around its forward and backward, its gradients reduce-scattered), without
//      and with overlap (mlp_step_2rank_zero3_overlap_*: the next layer gathered and the last
//      one's gradients reduce-scattered on the communication thread meanwhile).
//      tools/run_bench.py runs bench/peer/torch_dist_peer.py, the same with torch.distributed,
//      alternately with this program.
//   3. after each step run, its same-start run (bench/same_start.h): a fresh model, wrapped as
//      the timed one, from the weights torch_dist_peer.py gives its own, 20 steps on the global
//      batches both draw, each rank on its rows; the losses of the first and last steps averaged
//      over the ranks (*_same_start_loss_first, *_last). One process, DDP, ZeRO-3 and the peer
//      must agree: data parallelism computes the same step.
//
//   dist_bench [--quick] [--config]
//
// The program starts its ranks itself (distributed::spawn_ranks runs it again with
// MEMGRAD_DIST_BENCH naming the part) and prints rank 0's figures (bench/bench_util.h format).
// In a build without Gloo every figure is n/a.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "bench/bench_mlp.h"
#include "bench/bench_util.h"
#include "bench/memgrad_same_start.h"
#include "bench/same_start.h"
#include "distributed/distributed_data_parallel.h"
#include "distributed/error.h"
#include "distributed/process_group.h"
#include "distributed/spawn.h"
#include "distributed/zero_data_parallel.h"
#include "engine/factories.h"
#include "engine/nn/functional.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"
#include "memgrad_build_config.h"

namespace {

using namespace memgrad;

constexpr int64_t kAllReduceBytes = int64_t{64} << 20;
using bench::Mlp;
constexpr int64_t kBatch = bench::kMlpBatch;  // the global batch
constexpr int64_t kInputs = bench::kMlpInputs;
constexpr int64_t kClasses = bench::kMlpClasses;
constexpr int kPoolBatches = bench::kMlpPoolBatches;

bool quick() {
  const char* q = std::getenv("MEMGRAD_DIST_BENCH_QUICK");
  return q != nullptr && std::string(q) == "1";
}

// Rank part 1: times all_reduce of 64 MiB; rank 0 prints.
int all_reduce_rank() {
  auto pg = distributed::init_process_group(distributed::Backend::Gloo);
  const int warmup = 2, timed = quick() ? 3 : 10;
  Tensor t = ones({kAllReduceBytes / 4});
  std::vector<double> seconds;
  for (int i = 0; i < warmup + timed; ++i) {
    pg->barrier();
    const bench::Clock::time_point start = bench::Clock::now();
    pg->all_reduce(t, distributed::ReduceOp::Sum);
    if (i >= warmup) seconds.push_back(bench::seconds_since(start));
  }
  if (pg->rank() != 0) return 0;
  const double median = bench::median(seconds);
  const double n = pg->size();
  const double algbw = static_cast<double>(kAllReduceBytes) / median / 1e9;
  bench::report("allreduce_64mib_median", median * 1e3, "ms");
  bench::report("allreduce_64mib_algbw", algbw, "GB/s");
  bench::report("allreduce_64mib_busbw", algbw * 2.0 * (n - 1.0) / n, "GB/s");
  return 0;
}

// One rank's model, wrapped as `parallel` says (none in one process), and its optimizer.
// MEMGRAD_DIST_BENCH_PARALLEL names the variant (run_part): ddp is DDP's defaults, ddp_overlap
// the same with the overlap forced on, ddp_blocking DDP as it was before its communication
// thread, one bucket of 25 MiB reduced at the end of backward; zero3 runs
// ZeRO-3 in place of DDP (each layer gathered around its forward and backward, gradients
// reduce-scattered, the optimizer on this rank's shards), zero3_overlap with the communication on
// the communication thread meanwhile (ZeroOptions::overlap).
class Trainer {
 public:
  Trainer(std::shared_ptr<Mlp> model, const std::shared_ptr<distributed::ProcessGroup>& pg,
          const std::string& parallel)
      : runner_(model) {
    distributed::DDPOptions ddp_options;
    if (parallel == "ddp_blocking") ddp_options = {.first_bucket_cap_mb = 25.0, .overlap = false};
    if (parallel == "ddp_overlap") ddp_options.overlap = true;
    if (pg && parallel.starts_with("zero3")) {
      zero_ = std::make_shared<distributed::ZeroDataParallel>(
          model, pg, distributed::ZeroOptions{3, parallel == "zero3_overlap"});
      runner_ = zero_;
    } else if (pg) {
      ddp_ = std::make_shared<distributed::DistributedDataParallel>(model, pg, ddp_options);
      runner_ = ddp_;
    }
    optimizer_ =
        std::make_unique<optim::SGD>(zero_ ? zero_->shard_parameters() : model->parameters(),
                                     optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  }

  // Whether DDP reduces its buckets on the communication thread (false without DDP).
  bool ddp_overlaps() const { return ddp_ && ddp_->overlaps(); }

  // zero_grad + forward + backward + step on this rank's rows; `loss` is assigned before
  // backward (a training loop's `loss = ...` releases the last step's loss there).
  void step(const Tensor& input, const Tensor& target, Tensor& loss) {
    if (zero_) {
      zero_->zero_grad();
    } else {
      optimizer_->zero_grad();
    }
    loss = nn::cross_entropy((*runner_)(input), target);
    loss.backward();
    if (zero_) {
      zero_->step(*optimizer_);
    } else {
      optimizer_->step();
    }
  }

 private:
  std::shared_ptr<nn::UnaryModule> runner_;
  std::shared_ptr<distributed::DistributedDataParallel> ddp_;
  std::shared_ptr<distributed::ZeroDataParallel> zero_;
  std::unique_ptr<optim::SGD> optimizer_;
};

// Each of `values` averaged over the ranks, in one all-reduce (the values themselves in one
// process).
std::vector<double> rank_means(const std::shared_ptr<distributed::ProcessGroup>& pg,
                               std::vector<double> values) {
  if (!pg) return values;
  Tensor t = from_vector(values);
  pg->all_reduce(t, distributed::ReduceOp::Avg);
  const double* means = t.data_ptr<double>();
  return {means, means + values.size()};
}

// The same-start run (bench/same_start.h) of `parallel` on this rank: a fresh model from the
// weights and global batches torch_dist_peer.py draws alike, each rank training on its rows;
// the loss of every step, averaged over the ranks (the loss of the global batch).
std::vector<double> same_start_losses(const std::shared_ptr<distributed::ProcessGroup>& pg,
                                      int rank, int world, const std::string& parallel) {
  namespace ss = bench::same_start;
  auto model = std::make_shared<Mlp>();
  bench::load_same_start(*model, ss::linear_stack_shapes(bench::kMlpWidths));
  const int64_t rows = kBatch / world;
  std::vector<std::pair<Tensor, Tensor>> pool;  // this rank's rows: inputs, labels
  for (int b = 0; b < ss::kPoolBatches; ++b) {
    const Tensor x =
        from_vector(ss::normal_values(ss::batch_seed(b), kBatch * kInputs), {kBatch, kInputs});
    const Tensor y = from_vector(ss::integer_values(ss::batch_seed(b) + 1, kBatch, kClasses));
    pool.emplace_back(x.narrow(0, rank * rows, rows).contiguous(),
                      y.narrow(0, rank * rows, rows).contiguous());
  }
  Trainer trainer(model, pg, parallel);
  return rank_means(pg, ss::losses_over_steps<Tensor>(
                            pool, [&](const std::pair<Tensor, Tensor>& batch, Tensor& loss) {
                              trainer.step(batch.first, batch.second, loss);
                            }));
}

// Rank part 2: MLP steps, one process (world size 1: no group, no DDP) or DDP; rank 0 prints.
int step_rank() {
  const int world = std::atoi(std::getenv("WORLD_SIZE"));
  std::shared_ptr<distributed::ProcessGroup> pg;
  if (world > 1) pg = distributed::init_process_group(distributed::Backend::Gloo);
  const int rank = pg ? pg->rank() : 0;
  const int warmup = quick() ? 5 : 20, timed = quick() ? 30 : 200;
  const int threads = std::atoi(std::getenv("OMP_NUM_THREADS"));
  omp_set_num_threads(threads);
  manual_seed(0);
  std::vector<Tensor> inputs, targets;  // this rank's rows of each global batch
  const int64_t rows = kBatch / world;
  for (int i = 0; i < kPoolBatches; ++i) {
    const Tensor x = randn({kBatch, kInputs});
    const Tensor y = randint(0, kClasses, {kBatch});
    inputs.push_back(x.narrow(0, rank * rows, rows).contiguous());
    targets.push_back(y.narrow(0, rank * rows, rows).contiguous());
  }
  const char* parallel_env = std::getenv("MEMGRAD_DIST_BENCH_PARALLEL");
  const std::string parallel = parallel_env != nullptr ? parallel_env : "ddp";
  Trainer trainer(std::make_shared<Mlp>(), pg, parallel);
  std::vector<double> step_ms;
  Tensor loss;
  for (int s = 0; s < warmup + timed; ++s) {
    const auto b = static_cast<size_t>(s % kPoolBatches);
    const bench::Clock::time_point start = bench::Clock::now();
    trainer.step(inputs[b], targets[b], loss);
    if (s >= warmup) step_ms.push_back(bench::seconds_since(start) * 1e3);
  }
  const double final_loss = rank_means(pg, {loss.item<double>()})[0];
  const std::vector<double> same_start = same_start_losses(pg, rank, world, parallel);
  if (rank != 0) return 0;
  const std::string prefix = world > 1 ? fmt::format("mlp_step_{}rank_{}", world, parallel)
                             : threads == bench::kThreads
                                 ? "mlp_step_1rank"
                                 : fmt::format("mlp_step_1rank_{}thread", threads);
  if (world > 1 && parallel == "ddp") {  // one process has no DDP
    std::printf(
        "config: %s: DDP's buckets reduced %s (DDPOptions::overlap unset; %lld usable "
        "cores, %d ranks of %d thread)\n",
        prefix.c_str(),
        trainer.ddp_overlaps() ? "on the communication thread while backward goes on"
                               : "each in the hook that completes it, blocking",
        static_cast<long long>(distributed::usable_cores()), world, threads);
  }
  bench::report((prefix + "_median").c_str(), bench::median(step_ms), "ms");
  bench::report((prefix + "_p90").c_str(), bench::quantile(step_ms, 0.9), "ms");
  bench::report((prefix + "_final_loss").c_str(), final_loss, "nats");
  bench::same_start::report_run(prefix, {same_start, std::nullopt});
  return 0;
}

// Runs part `part` on `world` ranks of this program; returns rank 0's figure lines, or throws
// with every rank's output when one fails.
// `parallel`: ddp, ddp_blocking, zero3 or zero3_overlap (step_rank).
std::vector<std::string> run_part(const char* part, int world, int threads, bool quick_run,
                                  const char* parallel = "ddp") {
  distributed::SpawnOptions options;
  options.env = {{"MEMGRAD_DIST_BENCH", part},
                 {"MEMGRAD_DIST_BENCH_QUICK", quick_run ? "1" : "0"},
                 {"MEMGRAD_DIST_BENCH_PARALLEL", parallel},
                 {"OMP_NUM_THREADS", std::to_string(threads)}};
  const distributed::SpawnResult result = distributed::spawn_ranks(world, options);
  if (!result.ok()) {
    std::string all;
    for (const distributed::RankOutcome& r : result.ranks)
      all += fmt::format("\n[rank {}] {}", r.rank, r.output);
    throw distributed::DistributedError(fmt::format("dist_bench: {} on {} ranks: {}{}", part, world,
                                                    result.describe_failure(), all),
                                        part, result.first_failed_rank);
  }
  std::vector<std::string> lines;
  std::istringstream output(result.ranks[0].output);
  std::string line;
  while (std::getline(output, line)) {
    if (line.find(": ") != std::string::npos) lines.push_back(line);
  }
  return lines;
}

double value_of(const std::vector<std::string>& lines, const std::string& name) {
  for (const std::string& line : lines) {
    if (line.rfind(name + ": ", 0) == 0)
      return std::strtod(line.c_str() + name.size() + 2, nullptr);
  }
  return 0.0;
}

int run(const bench::Flags& flags) {
  bench::print_config("memgrad", bench::kThreads);
  std::printf("config: Gloo on loopback; 1 process x %d threads against 2 ranks x %d thread\n",
              bench::kThreads, bench::kThreads / 2);
  std::fflush(stdout);
  if (flags.config_only) return 0;
  const char* names[] = {"allreduce_64mib_median",
                         "allreduce_64mib_algbw",
                         "allreduce_64mib_busbw",
                         "mlp_step_1rank_median",
                         "mlp_step_1rank_1thread_median",
                         "mlp_step_2rank_ddp_median",
                         "mlp_step_2rank_ddp_overlap_median",
                         "mlp_step_2rank_ddp_blocking_median",
                         "mlp_step_2rank_zero3_median",
                         "mlp_step_2rank_zero3_overlap_median",
                         "ddp_2rank_speedup",
                         "ddp_2rank_scaling",
                         "mlp_step_1rank_same_start_loss_last",
                         "mlp_step_2rank_ddp_same_start_loss_last",
                         "mlp_step_2rank_zero3_same_start_loss_last",
                         "mlp_step_2rank_zero3_overlap_same_start_loss_last"};
  const char* units[] = {"ms", "GB/s", "GB/s", "ms", "ms",   "ms",   "ms",   "ms",
                         "ms", "ms",   "x",    "x",  "nats", "nats", "nats", "nats"};
  if (!MEMGRAD_WITH_GLOO) {
    std::printf("config: this build has no Gloo (libgloo-dev): no CPU ranks to measure\n");
    for (size_t i = 0; i < std::size(names); ++i) bench::report_missing(names[i], units[i]);
    return 0;
  }
  for (const std::string& line : run_part("allreduce", 2, 1, flags.quick))
    std::printf("%s\n", line.c_str());
  const std::vector<std::string> one = run_part("step", 1, bench::kThreads, flags.quick);
  const std::vector<std::string> one_thread = run_part("step", 1, 1, flags.quick);
  const std::vector<std::string> two = run_part("step", 2, bench::kThreads / 2, flags.quick);
  const std::vector<std::string> two_overlap_ddp =
      run_part("step", 2, bench::kThreads / 2, flags.quick, "ddp_overlap");
  const std::vector<std::string> two_blocking =
      run_part("step", 2, bench::kThreads / 2, flags.quick, "ddp_blocking");
  const std::vector<std::string> two_zero3 =
      run_part("step", 2, bench::kThreads / 2, flags.quick, "zero3");
  const std::vector<std::string> two_overlap =
      run_part("step", 2, bench::kThreads / 2, flags.quick, "zero3_overlap");
  for (const auto* lines :
       {&one, &one_thread, &two, &two_overlap_ddp, &two_blocking, &two_zero3, &two_overlap}) {
    for (const std::string& line : *lines) std::printf("%s\n", line.c_str());
  }
  // speedup: against one process on the same 2 cores; scaling: against one process on 1 core
  // (2 for perfect scaling: each rank computes half the rows on its own core).
  const double t1 = value_of(one, "mlp_step_1rank_median");
  const double t1_thread = value_of(one_thread, "mlp_step_1rank_1thread_median");
  const double t2 = value_of(two, "mlp_step_2rank_ddp_median");
  bench::report("ddp_2rank_speedup", t2 > 0 ? t1 / t2 : 0.0, "x");
  bench::report("ddp_2rank_scaling", t2 > 0 ? t1_thread / t2 : 0.0, "x");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (const char* part = std::getenv("MEMGRAD_DIST_BENCH")) {
      return std::string(part) == "allreduce" ? all_reduce_rank() : step_rank();
    }
    bench::Flags flags;
    if (const int status = bench::parse_flags(argc, argv, "dist_bench", flags); status >= 0) {
      return status;
    }
    return run(flags);
  } catch (const memgrad::Error& e) {
    std::fprintf(stderr, "dist_bench: %s\n", e.what());
    return 1;
  }
}
