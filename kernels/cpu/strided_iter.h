// The N-d walker for K operands that share one iteration shape.
//
// LoopNest walks the operands' IterShape (kernels/iter_shape.h: dimensions contiguous with each
// other in every operand merged, so a fully contiguous tensor becomes one flat loop), keeps the
// innermost dimension as a strided 1-d loop, and calls `inner(ptrs, byte_strides, n)` once per
// innermost row. Kernels write `inner` as a plain loop over n elements; when every byte stride
// equals the element size the compiler vectorises it. parallel_run splits the flat index range
// across OpenMP threads above a size threshold, each thread starting from its own multi-index,
// so results do not depend on the thread count.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "kernels/iter_shape.h"
#include "kernels/kernel_args.h"

namespace memgrad::kernels::cpu {

// Elements below which a loop stays on one thread (the cost of waking the team dominates).
inline constexpr int64_t kParallelThreshold = 32768;

template <size_t K>
struct LoopNest : IterShape<K> {
  using IterShape<K>::ndim;
  using IterShape<K>::sizes;
  using IterShape<K>::strides;
  using IterShape<K>::numel;

  // Builds the nest for operands that all have ops[0]'s sizes.
  static LoopNest make(const std::array<const Operand*, K>& ops) {
    LoopNest nest;
    static_cast<IterShape<K>&>(nest) = IterShape<K>::make(ops);
    return nest;
  }

  // Byte strides of the innermost dimension (0 for a 0-d nest).
  std::array<int64_t, K> inner_strides() const {
    std::array<int64_t, K> s{};
    if (ndim > 0) {
      for (size_t k = 0; k < K; ++k) s[k] = strides[k][ndim - 1];
    }
    return s;
  }

  // Runs `inner` over flat elements [begin, end).
  template <typename Inner>
  void run(const std::array<char*, K>& base, int64_t begin, int64_t end, Inner&& inner) const {
    if (begin >= end) return;
    const std::array<int64_t, K> is = inner_strides();
    if (ndim <= 1) {
      std::array<char*, K> p;
      for (size_t k = 0; k < K; ++k) p[k] = base[k] + begin * is[k];
      inner(p, is, end - begin);
      return;
    }
    const int64_t row = sizes[ndim - 1];
    // Multi-index of `begin` over the outer dimensions.
    int64_t idx[kMaxDims] = {};
    int64_t rem = begin / row;
    for (int d = ndim - 2; d >= 0; --d) {
      idx[d] = rem % sizes[d];
      rem /= sizes[d];
    }
    int64_t col = begin % row;
    int64_t done = begin;
    while (done < end) {
      std::array<char*, K> p;
      for (size_t k = 0; k < K; ++k) {
        int64_t off = col * is[k];
        for (int d = 0; d < ndim - 1; ++d) off += idx[d] * strides[k][d];
        p[k] = base[k] + off;
      }
      const int64_t n = std::min(row - col, end - done);
      inner(p, is, n);
      done += n;
      col = 0;
      for (int d = ndim - 2; d >= 0; --d) {
        if (++idx[d] < sizes[d]) break;
        idx[d] = 0;
      }
    }
  }
};

// Runs the nest over all elements, on several OpenMP threads when it is large enough.
template <size_t K, typename Inner>
void parallel_run(const LoopNest<K>& nest, const std::array<char*, K>& base, Inner&& inner) {
  const int64_t total = nest.numel;
  if (total < kParallelThreshold || omp_in_parallel()) {
    nest.run(base, 0, total, inner);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t t = omp_get_thread_num();
    // Chunks aligned to 16 elements so vectorised inner loops keep their alignment.
    const int64_t chunk = (total + threads - 1) / threads;
    const int64_t aligned = (chunk + 15) / 16 * 16;
    nest.run(base, std::min(total, t * aligned), std::min(total, (t + 1) * aligned), inner);
  }
}

// Byte pointers of operands, for LoopNest::run.
template <size_t K>
std::array<char*, K> base_pointers(const std::array<const Operand*, K>& ops) {
  std::array<char*, K> p;
  for (size_t k = 0; k < K; ++k) p[k] = static_cast<char*>(ops[k]->data);
  return p;
}

}  // namespace memgrad::kernels::cpu
