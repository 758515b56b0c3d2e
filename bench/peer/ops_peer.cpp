// ops_peer: bench/ops_bench.cpp in libtorch (the C++ API of PyTorch 1.13, Debian's
// libtorch-dev), op for op, with the same counts and the same output names, so that
// tools/run_bench.py can put the two side by side. See ops_bench.cpp for what each figure is.
//
//   ops_peer [--quick] [--config]
//
// Run it in the peer's best configuration (docs/performance.md, tools/run_bench.py sets it):
//   LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp  (OpenMP OpenBLAS, shares libgomp)
//   GLIBC_TUNABLES=glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=134217728
//   OPENBLAS_CORETYPE=SkylakeX only where OpenBLAS misdetects an AVX-512 CPU
// The thread count is set here (torch::set_num_threads): libtorch's default can be 1 on a VM.
#include <torch/torch.h>

#include <cstdio>

#include "bench/bench_util.h"

namespace {

constexpr int64_t kBigNumel = 16 * 1024 * 1024;
constexpr int kChainOps = 1000;

struct Counts {
  int loops = 5;
  int overhead_calls = 100000;
  int big_reps = 11;
  int backward_calls = 100;
};

void measure_overhead(const Counts& n) {
  torch::Tensor a = torch::ones({1});
  const torch::Tensor b = torch::ones({1});
  torch::Tensor c;
  const double add = bench::median_seconds_per_call([&] { c = a + b; }, n.loops, n.overhead_calls);
  bench::report("add_1elem_overhead", add * 1e9, "ns/op");
  const double add_ = bench::median_seconds_per_call([&] { a.add_(b); }, n.loops, n.overhead_calls);
  bench::report("add_inplace_1elem_overhead", add_ * 1e9, "ns/op");
  const torch::Tensor g = torch::ones({1}, torch::requires_grad());
  const double chain =
      bench::median_seconds_per_call([&] { c = g * b + b; }, n.loops, n.overhead_calls);
  bench::report("autograd_mul_add_1elem_overhead", chain / 2 * 1e9, "ns/op");
}

void measure_throughput(const Counts& n) {
  const torch::Tensor a = torch::randn({kBigNumel});
  const torch::Tensor b = torch::randn({kBigNumel});
  const double bytes3 = 3.0 * 4.0 * static_cast<double>(kBigNumel);
  torch::Tensor c;
  const double add = bench::median_seconds_per_call([&] { c = a + b; }, n.big_reps, 1);
  bench::report("add_16M", bytes3 / add / 1e9, "GB/s");
  c = torch::empty({kBigNumel});
  const double add_out =
      bench::median_seconds_per_call([&] { torch::add_out(c, a, b); }, n.big_reps, 1);
  bench::report("add_out_16M", bytes3 / add_out / 1e9, "GB/s");
  torch::Tensor m = torch::ones({kBigNumel});
  const double mul = bench::median_seconds_per_call([&] { m.mul_(2.0); }, n.big_reps, 1);
  bench::report("mul_inplace_16M", 2.0 * 4.0 * static_cast<double>(kBigNumel) / mul / 1e9, "GB/s");
}

void measure_sgemm(const Counts& n, int64_t m, int64_t k, int64_t cols, const char* name) {
  const torch::Tensor a = torch::randn({m, k});
  const torch::Tensor b = torch::randn({k, cols});
  torch::Tensor c = a.mm(b);
  const double t = bench::median_seconds_per_call([&] { c = a.mm(b); }, n.big_reps, 1);
  const double flop =
      2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(cols);
  bench::report(name, flop / t / 1e9, "GFLOP/s");
}

void measure_softmax(const Counts& n) {
  const torch::Tensor x = torch::randn({4096, 4096});
  torch::Tensor y;
  const double t = bench::median_seconds_per_call([&] { y = x.softmax(1); }, n.big_reps, 1);
  bench::report("softmax_4096x4096_time", t * 1e3, "ms");
  bench::report("softmax_4096x4096", 2.0 * 4.0 * 4096.0 * 4096.0 / t / 1e9, "GB/s");
}

double backward_seconds(const torch::Tensor& x, int calls) {
  double total = 0.0;
  for (int i = 0; i < calls; ++i) {
    torch::Tensor y = x;
    for (int j = 0; j < kChainOps; ++j) y = j % 2 == 0 ? y * 1.0001 : y + 0.0001;
    const bench::Clock::time_point start = bench::Clock::now();
    y.backward();
    total += bench::seconds_since(start);
    x.mutable_grad().reset();
  }
  return total / calls;
}

void measure_backward(const Counts& n) {
  const torch::Tensor x = torch::ones({1}, torch::requires_grad());
  std::vector<double> runs;
  for (int r = 0; r <= n.loops; ++r) {
    const double t = backward_seconds(x, n.backward_calls);
    if (r > 0) runs.push_back(t);
  }
  const double t = bench::median(runs);
  bench::report("backward_chain_1000", t * 1e6, "us/backward");
  bench::report("backward_chain_1000_per_node", t / kChainOps * 1e9, "ns/node");
}

int run(const bench::Flags& flags) {
  Counts n;
  if (flags.quick) n = Counts{3, 10000, 3, 20};
  torch::set_num_threads(bench::kThreads);
  bench::print_config("libtorch " TORCH_VERSION, torch::get_num_threads());
  if (flags.config_only) return 0;
  torch::manual_seed(0);
  measure_overhead(n);
  measure_throughput(n);
  measure_sgemm(n, 1024, 1024, 1024, "sgemm_1024x1024x1024");
  measure_sgemm(n, 4096, 512, 512, "sgemm_4096x512x512");
  measure_softmax(n);
  measure_backward(n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return bench::run_main(argc, argv, "ops_peer", run); }
