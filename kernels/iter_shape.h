// The iteration shape that the K operands of one op share, with size-1 dimensions dropped and
// dimensions merged where they are contiguous with each other in every operand (so a contiguous
// tensor becomes one flat dimension). Both backends walk operands from it: the CPU's LoopNest
// (cpu/strided_iter.h) by rows, the CUDA Indexer (cuda/launch.h) by flat index per thread.
// Plain data, built on the host; byte strides, so operands of different dtypes share it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "kernels/kernel_args.h"

namespace memgrad::kernels {

template <size_t K>
struct IterShape {
  int ndim = 0;                       // after merging; 0 means a single element
  int64_t sizes[kMaxDims] = {};       // outermost first
  int64_t strides[K][kMaxDims] = {};  // bytes
  int64_t numel = 1;

  // The shape of operands that all have ops[0]'s sizes (each with its own strides, in elements
  // of its own dtype).
  static IterShape make(const std::array<const Operand*, K>& ops) {
    IterShape shape;
    const Operand& first = *ops[0];
    for (int d = 0; d < first.ndim; ++d) {
      shape.numel *= first.sizes[d];
      if (first.sizes[d] == 1) continue;
      // Merge into the previous dim when (previous, d) are contiguous in every operand.
      const int n = shape.ndim;
      bool merge = n > 0;
      for (size_t k = 0; k < K && merge; ++k) {
        const auto es = static_cast<int64_t>(element_size(ops[k]->dtype));
        merge = shape.strides[k][n - 1] == ops[k]->strides[d] * es * first.sizes[d];
      }
      const int slot = merge ? n - 1 : n;
      shape.sizes[slot] = merge ? shape.sizes[slot] * first.sizes[d] : first.sizes[d];
      for (size_t k = 0; k < K; ++k) {
        shape.strides[k][slot] =
            ops[k]->strides[d] * static_cast<int64_t>(element_size(ops[k]->dtype));
      }
      if (!merge) ++shape.ndim;
    }
    return shape;
  }
};

}  // namespace memgrad::kernels
