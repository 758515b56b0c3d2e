// Helpers for CUDA-against-CPU tests: the same kernel call on CPU tensors and on their copies on
// cuda:0, then an element-by-element comparison with a stated tolerance that names the first
// mismatch and the largest difference (the oracle of STYLE.md section 7: CUDA against CPU on
// identical inputs). Kernels are called through the two KernelBackends directly, so every entry
// point is covered, backward and optimizer ones included, without linking autograd.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/memgrad.h"
#include "engine/op_support.h"

namespace memgrad::testing {

// With MEMGRAD_CUDA_TWIN_ON_CPU (the cuda_twin suite, in every build) the "GPU" side is the CPU
// too, a copy of its own: every case compiles without CUDA and runs on the CPU kernels, so a
// case that a GPU run fails is the GPU's disagreement, never a case the CPU cannot take.
#ifdef MEMGRAD_CUDA_TWIN_ON_CPU
inline const Device kCuda0("cpu");
#else
inline const Device kCuda0("cuda:0");
#endif

inline kernels::KernelBackend& cpu_kernels() { return kernels::cpu_backend(); }
inline kernels::KernelBackend& cuda_kernels() { return detail::kernels_for(kCuda0); }

// A tensor on the CPU and its copy on cuda:0.
struct Twin {
  Tensor cpu;
  Tensor gpu;
};

inline Twin twin(const Tensor& cpu) {
#ifdef MEMGRAD_CUDA_TWIN_ON_CPU
  return {cpu, cpu.clone()};
#else
  return {cpu, cpu.to(kCuda0)};
#endif
}

// An uninitialised twin for outputs (both filled with the same sentinel, so untouched elements
// compare equal).
inline Twin output_twin(const Shape& sizes, DType dtype, double sentinel = -7.0) {
  return twin(full(sizes, sentinel, dtype));
}

// Uniform values in [lo, hi) of `dtype` (int64: integers in [lo, hi); bool: half true), seeded.
inline Tensor random_tensor(const Shape& sizes, DType dtype, double lo = -2.0, double hi = 2.0,
                            uint64_t seed = 1234) {
  Generator g(seed);
  if (dtype == kInt64) {
    return randint(static_cast<int64_t>(lo), static_cast<int64_t>(hi), sizes, kInt64, &g);
  }
  const Tensor u = rand(sizes, kFloat64, &g);
  if (dtype == kBool) return u.lt(0.5);
  return (u * (hi - lo) + lo).to(dtype);
}

// The kernel operand of `t`.
inline kernels::Operand arg(const Tensor& t) { return detail::operand(t); }

// Checks |gpu - cpu| <= atol + rtol |cpu| for every element (NaNs must match NaNs).
inline void check_close(const Tensor& cpu, const Tensor& gpu, double rtol, double atol,
                        const std::string& what) {
  CAPTURE(what);
  REQUIRE(cpu.sizes() == gpu.sizes());
  CHECK_EQ(gpu.device().str(), kCuda0.str());
  const std::vector<double> want = cpu.to_vector<double>();
  const std::vector<double> got = gpu.to(kCPU).to_vector<double>();
  size_t first_bad = want.size();
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool both_nan = std::isnan(want[i]) && std::isnan(got[i]);
    const bool same_inf = std::isinf(want[i]) && want[i] == got[i];
    const double diff = both_nan || same_inf ? 0.0 : std::abs(got[i] - want[i]);
    // The bound of a NaN or an infinity is NaN (rtol x inf, with rtol 0): equal specials pass
    // without it.
    const bool close = both_nan || same_inf || diff <= atol + rtol * std::abs(want[i]);
    if (!close && first_bad == want.size()) first_bad = i;
    if (diff > worst || std::isnan(diff)) worst = diff;
  }
  CHECK_MESSAGE(
      first_bad == want.size(),
      fmt::format("{}: element {} of {}: cuda {} vs cpu {}; max |diff| {} (rtol {}, "
                  "atol {})",
                  what, first_bad, want.size(), first_bad < got.size() ? got[first_bad] : 0.0,
                  first_bad < want.size() ? want[first_bad] : 0.0, worst, rtol, atol));
}

inline void check_close(const Twin& t, double rtol, double atol, const std::string& what) {
  check_close(t.cpu, t.gpu, rtol, atol, what);
}

// Bit-for-bit equality (through float64, which holds every value of every dtype exactly, int64
// below 2^53 included).
inline void check_equal(const Twin& t, const std::string& what) {
  check_close(t.cpu, t.gpu, 0.0, 0.0, what);
}

// Equality of int64 results element by element, as int64 (check_equal goes through float64,
// which rounds values beyond 2^53).
inline void check_equal_int64(const Twin& t, const std::string& what) {
  CAPTURE(what);
  REQUIRE(t.cpu.sizes() == t.gpu.sizes());
  CHECK_EQ(t.gpu.to(kCPU).to_vector<int64_t>(), t.cpu.to_vector<int64_t>());
}

// Tolerances per dtype for results that go through transcendental functions or different
// summation orders: bfloat16 rounds at 2^-8, float16 at 2^-11, float32 at 2^-24, float64 at
// 2^-53 (four units of the last place each).
inline double rtol_for(DType dtype) {
  if (dtype == kBFloat16) return 1.6e-2;
  if (dtype == kFloat16) return 2e-3;
  if (dtype == kFloat32) return 2e-5;
  return 1e-11;
}

}  // namespace memgrad::testing
