// startup_bench: what a program costs in resident memory before and after CPU work, in the build
// it belongs to. Run from a CPU build and from a CUDA build (`./memgrad bench startup` runs
// both, the CUDA build as the "peer"), it shows that a CUDA build run on the CPU costs what a CPU
// build costs: the CUDA runtime is linked statically and loads the driver at its first call, and
// cuBLAS is loaded at the first GEMM on a GPU (kernels/cuda/cublas_api.h).
//
//   startup_bench [--quick] [--config]
//
// prints (bench/bench_util.h format): the RSS at the start of main (MiB), after a CPU training
// step of a small MLP (forward, backward, SGD), and the peak.
#include <cstdio>

#include "autograd/autograd.h"
#include "bench/bench_util.h"
#include "engine/nn/functional.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"
#include "memgrad_build_config.h"

int main(int argc, char** argv) {
  const double at_start = bench::current_rss_mib();
  using namespace memgrad;
  bench::Flags flags;
  if (const int status = bench::parse_flags(argc, argv, "startup_bench", flags); status >= 0) {
    return status;
  }
  bench::print_config("memgrad", bench::kThreads);
  std::printf("config: CUDA backend %s\n", MEMGRAD_WITH_CUDA ? "built" : "not built");
  if (flags.config_only) return 0;
  manual_seed(0);
  nn::Linear fc1(256, 256), fc2(256, 10);
  std::vector<Tensor> params = fc1.parameters();
  for (const Tensor& p : fc2.parameters()) params.push_back(p);
  optim::SGD sgd(params, {.lr = 0.1});
  const Tensor x = randn({64, 256});
  const Tensor y = randint(0, 10, {64}, kInt64);
  for (int step = 0; step < (flags.quick ? 2 : 10); ++step) {
    sgd.zero_grad();
    nn::cross_entropy(fc2.forward(relu(fc1.forward(x))), y).backward();
    sgd.step();
  }
  bench::report("startup_rss", at_start, "MiB");
  bench::report("cpu_run_rss", bench::current_rss_mib(), "MiB");
  bench::report("cpu_run_peak_rss", bench::peak_rss_mib(), "MiB");
  return 0;
}
