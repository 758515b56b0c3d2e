// ops_bench: what single ops cost in memgrad, next to the same program in libtorch
// (bench/peer/ops_peer.cpp; tools/run_bench.py runs both and prints the ratios).
//
// Measures, on the CPU with 2 threads, float32:
//   per-op overhead  1-element c = a + b and a.add_(b) (ns/op, median of 5 loops of 100k ops);
//                    with autograd recording: a requires grad, c = a * b + b (ns per op, 2 ops)
//   throughput       16M elements: c = a + b (GB/s, 3 x 4 bytes per element), the same into a
//                    preallocated c (add_out, no allocation), a.mul_(2) (GB/s, 2 x 4 bytes)
//   SGEMM            1024x1024x1024 and 4096x512x512 (GFLOP/s = 2mnk / t, median of 7 after
//                    warm-up)
//   softmax          over dim 1 of 4096x4096 (ms; GB/s counting 2 x 4 bytes per element)
//   backward         a chain of 1000 alternating y = y * 1.0001 / y = y + 0.0001 ops from a
//                    1-element leaf: y.backward() (us per backward, ns per node; the graph is
//                    built untimed, median of 5 loops of 100 backwards)
//
//   ops_bench [--quick] [--config]
//
// prints `name: value unit` lines (bench/bench_util.h); the peer prints the same names. Timing
// lives here and never in tests.
#include <omp.h>

#include <cstdio>

#include "autograd/autograd.h"
#include "bench/bench_util.h"

namespace {

using namespace memgrad;

constexpr int64_t kBigNumel = 16 * 1024 * 1024;
constexpr int kChainOps = 1000;

struct Counts {
  int loops = 5;  // timed loops per figure (the median is reported)
  int overhead_calls = 100000;
  int big_reps = 11;         // single-op timings of the 16M / GEMM / softmax ops
  int backward_calls = 100;  // backwards per loop
};

void measure_overhead(const Counts& n) {
  Tensor a = ones({1});
  const Tensor b = ones({1});
  Tensor c;
  const double add = bench::median_seconds_per_call([&] { c = a + b; }, n.loops, n.overhead_calls);
  bench::report("add_1elem_overhead", add * 1e9, "ns/op");
  const double add_ = bench::median_seconds_per_call([&] { a.add_(b); }, n.loops, n.overhead_calls);
  bench::report("add_inplace_1elem_overhead", add_ * 1e9, "ns/op");
  const Tensor g = ones({1}, TensorOptions().with_requires_grad());
  const double chain =
      bench::median_seconds_per_call([&] { c = g * b + b; }, n.loops, n.overhead_calls);
  bench::report("autograd_mul_add_1elem_overhead", chain / 2 * 1e9, "ns/op");
}

void measure_throughput(const Counts& n) {
  const Tensor a = randn({kBigNumel});
  const Tensor b = randn({kBigNumel});
  const double bytes3 = 3.0 * 4.0 * static_cast<double>(kBigNumel);
  Tensor c;
  const double add = bench::median_seconds_per_call([&] { c = a + b; }, n.big_reps, 1);
  bench::report("add_16M", bytes3 / add / 1e9, "GB/s");
  c = empty({kBigNumel});
  const double add_out =
      bench::median_seconds_per_call([&] { memgrad::add_out(c, a, b); }, n.big_reps, 1);
  bench::report("add_out_16M", bytes3 / add_out / 1e9, "GB/s");
  Tensor m = ones({kBigNumel});
  const double mul = bench::median_seconds_per_call([&] { m.mul_(2.0); }, n.big_reps, 1);
  bench::report("mul_inplace_16M", 2.0 * 4.0 * static_cast<double>(kBigNumel) / mul / 1e9, "GB/s");
}

void measure_sgemm(const Counts& n, int64_t m, int64_t k, int64_t cols, const char* name) {
  const Tensor a = randn({m, k});
  const Tensor b = randn({k, cols});
  Tensor c = a.mm(b);  // an extra warm-up: OpenBLAS's buffers and threads
  const double t = bench::median_seconds_per_call([&] { c = a.mm(b); }, n.big_reps, 1);
  const double flop =
      2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(cols);
  bench::report(name, flop / t / 1e9, "GFLOP/s");
}

void measure_softmax(const Counts& n) {
  const Tensor x = randn({4096, 4096});
  Tensor y;
  const double t = bench::median_seconds_per_call([&] { y = x.softmax(1); }, n.big_reps, 1);
  bench::report("softmax_4096x4096_time", t * 1e3, "ms");
  bench::report("softmax_4096x4096", 2.0 * 4.0 * 4096.0 * 4096.0 / t / 1e9, "GB/s");
}

// Mean seconds of y.backward() over `calls` freshly built chains.
double backward_seconds(const Tensor& x, int calls) {
  double total = 0.0;
  for (int i = 0; i < calls; ++i) {
    Tensor y = x;
    for (int j = 0; j < kChainOps; ++j) y = j % 2 == 0 ? y * 1.0001 : y + 0.0001;
    const bench::Clock::time_point start = bench::Clock::now();
    y.backward();
    total += bench::seconds_since(start);
    x.set_grad(Tensor());
  }
  return total / calls;
}

void measure_backward(const Counts& n) {
  const Tensor x = ones({1}, TensorOptions().with_requires_grad());
  std::vector<double> runs;
  for (int r = 0; r <= n.loops; ++r) {
    const double t = backward_seconds(x, n.backward_calls);
    if (r > 0) runs.push_back(t);  // the first loop is the warm-up
  }
  const double t = bench::median(runs);
  bench::report("backward_chain_1000", t * 1e6, "us/backward");
  bench::report("backward_chain_1000_per_node", t / kChainOps * 1e9, "ns/node");
}

int run(const bench::Flags& flags) {
  Counts n;
  if (flags.quick) n = Counts{3, 10000, 3, 20};
  omp_set_num_threads(bench::kThreads);
  bench::print_config("memgrad", bench::kThreads);
  if (flags.config_only) return 0;
  manual_seed(0);
  measure_overhead(n);
  measure_throughput(n);
  measure_sgemm(n, 1024, 1024, 1024, "sgemm_1024x1024x1024");
  measure_sgemm(n, 4096, 512, 512, "sgemm_4096x512x512");
  measure_softmax(n);
  measure_backward(n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return bench::run_main(argc, argv, "ops_bench", run); }
