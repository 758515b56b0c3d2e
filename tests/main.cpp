// The doctest main shared by every test executable: prints the build configuration first so a
// log says what was tested, then runs the cases.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <fmt/format.h>

#include "memgrad_build_config.h"

#ifndef MEMGRAD_SANITIZE
#define MEMGRAD_SANITIZE 0
#endif

int main(int argc, char** argv) {
  fmt::print("memgrad {} tests (cuda: {}, blas: {}, sanitizers: {})\n", MEMGRAD_VERSION,
             MEMGRAD_WITH_CUDA ? "on" : "off", MEMGRAD_WITH_BLAS ? "openblas" : "eigen",
             MEMGRAD_SANITIZE ? "address,undefined" : "off");
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
