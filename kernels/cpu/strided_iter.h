// The N-d walker for K operands that share one iteration shape.
//
// LoopNest merges dimensions that are contiguous with each other in every operand (so a fully
// contiguous tensor becomes one flat loop), keeps the innermost dimension as a strided 1-d loop,
// and calls `inner(ptrs, byte_strides, n)` once per innermost row. Kernels write `inner` as a
// plain loop over n elements; when every byte stride equals the element size the compiler
// vectorises it. parallel_run splits the flat index range across OpenMP threads above a size
// threshold, each thread starting from its own multi-index, so results do not depend on the
// thread count.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "kernels/kernel_args.h"

namespace memgrad::kernels::cpu {

// Elements below which a loop stays on one thread (the cost of waking the team dominates).
inline constexpr int64_t kParallelThreshold = 32768;

template <size_t K>
struct LoopNest {
  int ndim = 0;                                 // after merging; 0 means a single element
  int64_t sizes[kMaxDims] = {};                 // outermost first
  int64_t strides[K][kMaxDims] = {};            // bytes
  int64_t numel = 1;

  // Builds the nest for operands that all have ops[0]'s sizes.
  static LoopNest make(const std::array<const Operand*, K>& ops) {
    LoopNest nest;
    const Operand& first = *ops[0];
    for (int d = 0; d < first.ndim; ++d) nest.numel *= first.sizes[d];
    // Drop size-1 dimensions, then merge (outer, inner) pairs that are contiguous everywhere.
    for (int d = 0; d < first.ndim; ++d) {
      if (first.sizes[d] == 1) continue;
      const int n = nest.ndim;
      bool merge = n > 0;
      for (size_t k = 0; k < K && merge; ++k) {
        const int64_t es = static_cast<int64_t>(element_size(ops[k]->dtype));
        merge = nest.strides[k][n - 1] == ops[k]->strides[d] * es * first.sizes[d];
      }
      if (merge) {
        nest.sizes[n - 1] *= first.sizes[d];
        for (size_t k = 0; k < K; ++k) {
          nest.strides[k][n - 1] =
              ops[k]->strides[d] * static_cast<int64_t>(element_size(ops[k]->dtype));
        }
      } else {
        nest.sizes[n] = first.sizes[d];
        for (size_t k = 0; k < K; ++k) {
          nest.strides[k][n] = ops[k]->strides[d] * static_cast<int64_t>(element_size(ops[k]->dtype));
        }
        ++nest.ndim;
      }
    }
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
