// The doctest main of the CUDA suite: the CUDA-only cases, and the engine suite's (its object
// files, linked here) on cuda:0 as well as the CPU and a simulated device. Without a CUDA device it
// prints why and how many test cases it would have run, and returns 77, which Meson reports as
// "skipped" (tools/test_summary.py reads the count). With a device it warms up the cuBLAS workspace
// of cuda:0's default stream first, so the engine suites' exact byte relations around matrix
// products hold on CUDA as on the CPU (the workspace is taken once per stream and then stays, as in
// PyTorch).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include <fmt/format.h>

#include "engine/memgrad.h"
#include "memgrad_build_config.h"
#include "tests/support/tensor_check.h"

#ifndef MEMGRAD_SANITIZE
#define MEMGRAD_SANITIZE 0
#endif

namespace {

// Registered test cases not marked skip: what a run without filters would execute.
size_t runnable_test_cases() {
  size_t n = 0;
  for (const doctest::detail::TestCase& tc : doctest::detail::getRegisteredTests()) {
    if (!tc.m_skip) ++n;
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  fmt::print("memgrad {} CUDA tests (cuda: {}, blas: {}, sanitizers: {})\n", MEMGRAD_VERSION,
             MEMGRAD_WITH_CUDA ? "on" : "off", MEMGRAD_WITH_BLAS ? "openblas" : "eigen",
             MEMGRAD_SANITIZE ? "address,undefined" : "off");
  if (!memgrad::cuda::is_available()) {
    fmt::print("skipped: no CUDA device ({} test cases)\n", runnable_test_cases());
    std::fflush(stdout);
    return 77;
  }
  const memgrad::cuda::DeviceProperties p = memgrad::cuda::get_device_properties(0);
  fmt::print("cuda:0 is {} ({} multiprocessors, {:.1f} GiB, compute capability {}.{})\n", p.name,
             p.multi_processor_count, static_cast<double>(p.total_memory) / (1 << 30), p.major,
             p.minor);
  {
    using namespace memgrad;
    const Tensor a = ones({2, 2}, TensorOptions(kFloat32).with_device(Device("cuda:0")));
    (void)matmul(a, a);
  }
  memgrad::testing::cuda_under_test() = true;  // the engine suite's cases run on cuda:0 too
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
