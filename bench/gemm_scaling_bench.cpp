// gemm_scaling_bench: how close the GEMM library comes to the FMA-peak bound (bench/fma_peak.h)
// on the training steps' own products (bench/step_gemms.h), on one thread and on two, on the
// machine at hand. The train and train_charlm benchmarks set each step against the bound of two
// threads; this one says which part of the distance is the library's (its products on one
// thread against one thread's peak) and which the machine's (two threads against two threads'
// peak, and two threads each running every product by itself, sharing nothing, against the same
// peak: what two independent single-threaded GEMM streams get from the machine).
//
// For the MLP of train_bench (784-512-512-10, batch 128) and the transformer of
// train_charlm_bench, in 10 interleaved blocks (the FMA peak of a shared machine moves within
// seconds, so each block sets its products against the peaks measured next to them):
//   one thread:   the products one after another through memgrad's matmul on one thread, and
//                 the FMA peak of one thread
//   two threads:  the same with two threads, as the steps run them, and the peak of two threads
//   two at once:  two threads, each running every product on its own operands on one thread
// Each block times the products 3 times per mode (the median counts). Printed, per model: the
// medians over blocks of the three times (ms) and of each one's fraction of its peak (the
// product FLOPs per second over the peak measured in the same block; for "two at once", twice
// the FLOPs), and the two peaks' medians (GFLOP/s).
//
//   gemm_scaling_bench [--quick] [--config]
//
// --quick: 3 blocks, the MLP only.
#include <omp.h>

#include <functional>
#include <string>
#include <vector>

#include "bench/bench_shapes.h"
#include "bench/bench_util.h"
#include "bench/fma_peak.h"
#include "bench/memgrad_products.h"

namespace {

constexpr int kBlocks = 10;
constexpr int kQuickBlocks = 3;
constexpr int kRepeats = 3;

using Products = std::vector<std::function<void()>>;

void run_all(const Products& products) {
  for (const auto& run : products) run();
}

// The median of kRepeats timings (ms) of `run`, after one untimed call.
template <typename Run>
double median_ms(Run&& run) {
  return bench::median_seconds_per_call(run, kRepeats, /*calls=*/1) * 1e3;
}

struct Scaling {
  std::vector<double> one_ms, two_ms, at_once_ms;
  std::vector<double> one_of_peak, two_of_peak, at_once_of_peak;
  std::vector<double> peak_one, peak_two;
};

Scaling measure(const std::vector<bench::GemmShape>& shapes, int blocks) {
  const double gflop = bench::gemm_flops(shapes) / 1e9;
  // One set of operands per thread of "two at once", so the two streams share nothing.
  const Products mine = bench::prepared_products(shapes, bench::memgrad_products()),
                 theirs = bench::prepared_products(shapes, bench::memgrad_products());
  Scaling s;
  for (int b = 0; b < blocks; ++b) {
    omp_set_num_threads(1);
    const double peak_one = bench::measured_fma_peak_gflops(1);
    const double one = median_ms([&] { run_all(mine); });
    omp_set_num_threads(bench::kThreads);
    const double peak_two = bench::measured_fma_peak_gflops(bench::kThreads);
    const double two = median_ms([&] { run_all(mine); });
    // Inside a parallel region memgrad's GEMM and OpenBLAS's run each call on the calling thread.
    const double at_once = median_ms([&] {
#pragma omp parallel num_threads(2)
      run_all(omp_get_thread_num() == 0 ? mine : theirs);
    });
    s.one_ms.push_back(one);
    s.two_ms.push_back(two);
    s.at_once_ms.push_back(at_once);
    s.peak_one.push_back(peak_one);
    s.peak_two.push_back(peak_two);
    s.one_of_peak.push_back(gflop / (one / 1e3) / peak_one);
    s.two_of_peak.push_back(gflop / (two / 1e3) / peak_two);
    s.at_once_of_peak.push_back(2.0 * gflop / (at_once / 1e3) / peak_two);
  }
  return s;
}

void report(const std::string& model, const std::vector<bench::GemmShape>& shapes,
            const Scaling& s) {
  auto line = [&](const char* name, double value, const char* unit) {
    bench::report((model + name).c_str(), value, unit);
  };
  using bench::median;
  line("_gemms_gflop", bench::gemm_flops(shapes) / 1e9, "GFLOP");
  line("_gemms_one_thread", median(s.one_ms), "ms");
  line("_gemms_two_threads", median(s.two_ms), "ms");
  line("_gemms_two_at_once", median(s.at_once_ms), "ms");
  line("_gemms_one_thread_of_peak", median(s.one_of_peak), "of 1-thread peak");
  line("_gemms_two_threads_of_peak", median(s.two_of_peak), "of 2-thread peak");
  line("_gemms_two_at_once_of_peak", median(s.at_once_of_peak), "of 2-thread peak");
  line("_fma_peak_one_thread", median(s.peak_one), "GFLOP/s");
  line("_fma_peak_two_threads", median(s.peak_two), "GFLOP/s");
}

int run(const bench::Flags& flags) {
  bench::print_config("memgrad", bench::kThreads);
  if (flags.config_only) return 0;
  memgrad::manual_seed(0);
  const int blocks = flags.quick ? kQuickBlocks : kBlocks;
  const auto mlp = bench::linear_stack_step_gemms(bench::kMlpWidths, bench::kMlpBatch);
  report("mlp", mlp, measure(mlp, blocks));
  if (flags.quick) return 0;
  // train_charlm_bench's transformer.
  const bench::TransformerSizes& t = bench::kCharlm;
  const auto charlm =
      bench::transformer_step_gemms(t.vocab, t.width, t.layers, t.heads, t.context, t.batch);
  report("charlm", charlm, measure(charlm, blocks));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return bench::run_main(argc, argv, "gemm_scaling_bench", run); }
