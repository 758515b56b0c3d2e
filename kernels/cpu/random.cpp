// CPU random fills. Element i of a contiguous output uses Philox counter offset + i / 4 and
// word i % 4 (normal: words 2j and 2j+1 feed one Box-Muller pair), so the values are the same
// for any thread count and on the CUDA backend. The draws are kernels/random_formulas.h, shared
// with the CUDA backend; this file holds the loops and the stores.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/element_types.h"
#include "kernels/random_formulas.h"

namespace memgrad::kernels::cpu {
namespace {

template <typename T>
void store(void* data, int64_t i, double v) {
  if constexpr (is_reduced_v<T>) {
    static_cast<T*>(data)[i] = T(static_cast<float>(v));
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
    const int bits = uniform_bits(std::is_same_v<T, double>, std::is_same_v<T, half>,
                                  std::is_same_v<T, bfloat16>);
    for_each_block(out.numel(), seed, offset, [&](const Philox4& r, int64_t i, int j) {
      store<T>(out.data, i, uniform_draw(r.w[j], bits, from, to - from));
    });
  });
}

void CpuBackend::normal(const Operand& out, uint64_t seed, uint64_t offset, double mean,
                        double std) {
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    for_each_block(out.numel(), seed, offset, [&](const Philox4& r, int64_t i, int j) {
      store<T>(out.data, i, normal_draw(r, j, mean, std));
    });
  });
}

void CpuBackend::randint(const Operand& out, uint64_t seed, uint64_t offset, int64_t low,
                         int64_t high) {
  const auto range = static_cast<uint64_t>(high - low);
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    for_each_block(out.numel(), seed, offset, [&](const Philox4& r, int64_t i, int j) {
      store<T>(out.data, i, randint_draw(r.w[j], low, range));
    });
  });
}

void CpuBackend::bernoulli(const Operand& out, uint64_t seed, uint64_t offset, double p) {
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    for_each_block(out.numel(), seed, offset, [&](const Philox4& r, int64_t i, int j) {
      store<T>(out.data, i, bernoulli_draw(r.w[j], p));
    });
  });
}

}  // namespace memgrad::kernels::cpu
