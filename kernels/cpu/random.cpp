// CPU random fills. Element i of a contiguous output uses Philox counter offset + i / 4 and
// word i % 4 (normal: words 2j and 2j+1 feed one Box-Muller pair), so the values are the same
// for any thread count and on the CUDA backend.
#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/element_types.h"
#include "kernels/philox.h"

namespace memgrad::kernels::cpu {
namespace {

constexpr double kTwoPi = 6.283185307179586;

template <typename T>
void store(void* data, int64_t i, double v) {
  if constexpr (std::is_same_v<T, half>) {
    static_cast<T*>(data)[i] = half(static_cast<float>(v));
  } else {
    static_cast<T*>(data)[i] = static_cast<T>(v);
  }
}

// Calls value(words, j) for every element j of block b (4 elements per Philox block).
template <typename Fn>
void for_each_block(int64_t numel, uint64_t seed, uint64_t offset, Fn fn) {
  const int64_t blocks = (numel + 3) / 4;
#pragma omp parallel for if (numel > 65536) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const Philox4 r = philox4x32(seed, offset + static_cast<uint64_t>(b));
    for (int64_t j = 0; j < 4 && b * 4 + j < numel; ++j) fn(r, b * 4 + j, static_cast<int>(j));
  }
}

}  // namespace

void CpuBackend::uniform(const Operand& out, uint64_t seed, uint64_t offset, double from,
                         double to) {
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    for_each_block(out.numel(), seed, offset, [&](const Philox4& r, int64_t i, int j) {
      const double u = std::is_same_v<T, double> ? uniform_double(r.w[j]) : uniform_float(r.w[j]);
      store<T>(out.data, i, from + (to - from) * u);
    });
  });
}

void CpuBackend::normal(const Operand& out, uint64_t seed, uint64_t offset, double mean,
                        double std) {
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    for_each_block(out.numel(), seed, offset, [&](const Philox4& r, int64_t i, int j) {
      const int pair = j & ~1;
      const double u1 = (static_cast<double>(r.w[pair]) + 1.0) * (1.0 / 4294967297.0);  // (0, 1)
      const double u2 = uniform_double(r.w[pair + 1]);
      const double radius = std::sqrt(-2.0 * std::log(u1));
      const double z = (j & 1) ? radius * std::sin(kTwoPi * u2) : radius * std::cos(kTwoPi * u2);
      store<T>(out.data, i, mean + std * z);
    });
  });
}

void CpuBackend::randint(const Operand& out, uint64_t seed, uint64_t offset, int64_t low,
                         int64_t high) {
  const auto range = static_cast<uint64_t>(high - low);
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    for_each_block(out.numel(), seed, offset, [&](const Philox4& r, int64_t i, int j) {
      store<T>(out.data, i, static_cast<double>(low + static_cast<int64_t>(r.w[j] % range)));
    });
  });
}

void CpuBackend::bernoulli(const Operand& out, uint64_t seed, uint64_t offset, double p) {
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    for_each_block(out.numel(), seed, offset, [&](const Philox4& r, int64_t i, int j) {
      store<T>(out.data, i, uniform_double(r.w[j]) < p ? 1.0 : 0.0);
    });
  });
}

}  // namespace memgrad::kernels::cpu
