// Launch helpers shared by the CUDA kernel files: the strided indexer kernels receive by value,
// grid sizing, and the launch-error check. Host-side C++ (compiled by nvcc in .cu files and by
// the C++ compiler in cuda_check.cpp); device-only helpers are in launch.cuh.
//
// Indexer<K> is the CUDA counterpart of the CPU's LoopNest: K operands sharing one IterShape
// (kernels/iter_shape.h: dims dropped when of size 1 and merged when contiguous with each other
// in every operand, so a contiguous tensor becomes one flat dim). A thread turns a flat
// (row-major) index into K byte offsets; shapes under 2^32 elements use 32-bit division.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <source_location>
#include <string>

#include "kernels/host_device.h"
#include "kernels/iter_shape.h"
#include "kernels/kernel_args.h"

namespace memgrad::kernels::cuda {

// Threads per block for elementwise and row kernels.
inline constexpr int kBlockThreads = 256;
// Most blocks an elementwise launch uses; grid-stride loops cover the rest.
inline constexpr int64_t kMaxBlocks = int64_t{1} << 20;

// Blocks for `n` work items of `per_block` each (at least 1, at most kMaxBlocks).
inline unsigned grid_for(int64_t n, int64_t per_block = kBlockThreads) {
  const int64_t blocks = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

template <int K>
struct Indexer : IterShape<K> {
  using IterShape<K>::ndim;
  using IterShape<K>::sizes;
  using IterShape<K>::strides;
  bool small = true;  // numel < 2^32: 32-bit index math

  // Byte offsets of flat element `i` in each operand.
  MEMGRAD_HOST_DEVICE void offsets(int64_t i, int64_t (&off)[K]) const {
    for (int k = 0; k < K; ++k) off[k] = 0;
    if (small) {
      auto r = static_cast<uint32_t>(i);
      for (int d = ndim - 1; d >= 0; --d) {
        const auto size = static_cast<uint32_t>(sizes[d]);
        const uint32_t q = r / size;
        const int64_t c = r - q * size;
        r = q;
        for (int k = 0; k < K; ++k) off[k] += c * strides[k][d];
      }
      return;
    }
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t q = i / sizes[d];
      const int64_t c = i - q * sizes[d];
      i = q;
      for (int k = 0; k < K; ++k) off[k] += c * strides[k][d];
    }
  }
};

// The indexer of operands that all have ops[0]'s sizes (strides in elements, of each operand's
// own dtype).
template <int K>
Indexer<K> make_indexer(const std::array<const Operand*, K>& ops) {
  Indexer<K> ix;
  static_cast<IterShape<K>&>(ix) = IterShape<K>::make(ops);
  ix.small = ix.numel < (int64_t{1} << 32);
  return ix;
}

// Whether every operand is contiguous (after merging: at most one dim, of unit stride).
template <int K>
bool all_contiguous(const Indexer<K>& ix, const std::array<const Operand*, K>& ops) {
  if (ix.ndim == 0) return true;
  if (ix.ndim > 1) return false;
  for (int k = 0; k < K; ++k) {
    if (ix.strides[k][0] != static_cast<int64_t>(element_size(ops[k]->dtype))) return false;
  }
  return true;
}

// "float32" etc. (the engine's names; the kernels layer has no dtype_name).
const char* dtype_label(DType dtype);
// "[2, 3] float32 strides (3, 1)".
std::string describe(const Operand& op);
// "operands [2, 3] float32 strides (3, 1), ..." for a launch error.
std::string describe(const Operand* const* ops, size_t count);

// The bit pattern of `value` stored as one element of `dtype`, converted as the CPU's fill
// does (float16 through float, bool as value != 0), in the low bytes.
uint64_t element_bits(DType dtype, double value);

// Throws CudaError when the last kernel launch failed, naming `kernel` and its `count`
// operands (cudaGetLastError: also reports an earlier asynchronous failure on the device).
void check_launch(const char* kernel, const Operand* const* ops, size_t count,
                  std::source_location where = std::source_location::current());
inline void check_launch(const char* kernel, std::initializer_list<const Operand*> ops = {},
                         std::source_location where = std::source_location::current()) {
  check_launch(kernel, ops.begin(), ops.size(), where);
}
template <size_t K>
void check_launch(const char* kernel, const std::array<const Operand*, K>& ops,
                  std::source_location where = std::source_location::current()) {
  check_launch(kernel, ops.data(), K, where);
}

}  // namespace memgrad::kernels::cuda
