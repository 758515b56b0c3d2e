// The doctest main of the distributed suite, which is also its rank program: with
// MEMGRAD_TEST_WORKER set (by run_workers) it runs that worker as one rank and returns its status.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "allocator/error.h"
#include "memgrad_build_config.h"
#include "tests/distributed/workers.h"

#ifndef MEMGRAD_SANITIZE
#define MEMGRAD_SANITIZE 0
#endif

int main(int argc, char** argv) {
  if (const char* name = std::getenv("MEMGRAD_TEST_WORKER")) {
    const memgrad::testing::WorkerFn worker = memgrad::testing::find_worker(name);
    if (worker == nullptr) {
      fmt::print(stderr, "no worker named '{}'\n", name);
      return 2;
    }
    try {
      const int status = worker();
      std::fflush(stdout);
      return status;
    } catch (const std::exception& e) {
      fmt::print("uncaught: {}\n", e.what());
      std::fflush(stdout);
      return 1;
    }
  }
  fmt::print("memgrad {} distributed tests (cuda: {}, gloo: {}, sanitizers: {})\n", MEMGRAD_VERSION,
             MEMGRAD_WITH_CUDA ? "on" : "off", MEMGRAD_WITH_GLOO ? "on" : "off",
             MEMGRAD_SANITIZE ? "address,undefined" : "off");
  if (!MEMGRAD_WITH_GLOO) {
    fmt::print("skipped: this build has no Gloo, which the CPU ranks of these tests need\n");
    std::fflush(stdout);
    return 77;
  }
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
