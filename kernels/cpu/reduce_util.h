// Shared pieces of the CPU reduction and softmax kernels (reduce.cpp, softmax.cpp).
//
// ReducePlan splits an input's dims into kept dims (the output's) and reduced dims (size 1 in
// the output), merging dims that are contiguous with each other, so every reduction reads as
// "for each output, fold a strided sub-tensor of reduce_numel elements". The drivers spread the
// work over OpenMP threads deterministically: whole outputs per thread, or one reduction cut
// into chunks of a fixed number of elements (never derived from the thread count) whose partial
// results are combined in chunk order. The row primitives keep several independent accumulators
// so GCC vectorises them; float sums add blocks of kReduceBlock elements into a double total.
// pick and extreme_identity (max/min with NaN propagation) are kernels/reduce_formulas.h's.
// Nothing here takes memory from the device allocators (chunk partials live on the host heap).
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/element_types.h"
#include "kernels/cpu/strided_iter.h"
#include "kernels/operand_layout.h"
#include "kernels/reduce_formulas.h"

namespace memgrad::kernels::cpu {

// Elements a float lane accumulator sums before its block total is added in double.
inline constexpr int64_t kReduceBlock = 4096;
// Elements per chunk when a single reduction is split across threads.
inline constexpr int64_t kReduceChunk = int64_t{1} << 16;
// Outputs from which threads take whole outputs instead of splitting each one.
inline constexpr int64_t kMinParallelOutputs = 16;

template <typename T>
inline T load(const char* p) {
  return *reinterpret_cast<const T*>(p);
}

// x (of storage type T) converted to A through T's compute type (half -> float -> A).
template <typename A, typename T>
inline A to_acc(T x) {
  return static_cast<A>(static_cast<compute_t<T>>(x));
}

// Appends one dimension (size, stride per operand in elements) to every operand of `dst`,
// merging it into their last dimension when that is contiguous with it in all of them.
// Size-1 dimensions are dropped: they never move a pointer.
template <size_t K>
void append_dim(const std::array<Operand*, K>& dst, int64_t size,
                const std::array<int64_t, K>& strides) {
  if (size == 1) return;
  const int n = dst[0]->ndim;
  bool merge = n > 0;
  for (size_t k = 0; k < K && merge; ++k) merge = dst[k]->strides[n - 1] == strides[k] * size;
  for (size_t k = 0; k < K; ++k) {
    Operand& op = *dst[k];
    if (merge) {
      op.sizes[n - 1] *= size;
      op.strides[n - 1] = strides[k];
    } else {
      op.sizes[n] = size;
      op.strides[n] = strides[k];
      op.ndim = n + 1;
    }
  }
}

// The split of a reduction's input into kept and reduced dimensions.
struct ReducePlan {
  Operand red;       // reduced dims of the input, largest stride first (strides in elements)
  Operand kept_in;   // kept dims of the input, in order
  Operand kept_out;  // the same dims of the output
  int64_t num_outputs = 1;
  int64_t reduce_numel = 1;

  // Input (bytes) of output j, row-major over the kept dims.
  const char* input_of(int64_t j) const {
    return static_cast<const char*>(kept_in.data) +
           element_offset(kept_in, j) * static_cast<int64_t>(element_size(kept_in.dtype));
  }
  char* output_of(int64_t j) const {
    return static_cast<char*>(kept_out.data) +
           element_offset(kept_out, j) * static_cast<int64_t>(element_size(kept_out.dtype));
  }
  // Stride in bytes of the innermost reduced dim (0 when nothing is reduced).
  int64_t inner_red_stride() const {
    return red.ndim == 0
               ? 0
               : red.strides[red.ndim - 1] * static_cast<int64_t>(element_size(red.dtype));
  }
};

// A dim is reduced where `out` has size 1 and `in` does not (the backend's convention).
inline ReducePlan make_reduce_plan(const Operand& out, const Operand& in) {
  ReducePlan plan;
  plan.red.dtype = plan.kept_in.dtype = in.dtype;
  plan.kept_out.dtype = out.dtype;
  plan.red.data = plan.kept_in.data = in.data;
  plan.kept_out.data = out.data;
  std::array<int, kMaxDims> reduced{};
  int num_reduced = 0;
  for (int d = 0; d < in.ndim; ++d) {
    if (out.sizes[d] == 1 && in.sizes[d] != 1) {
      reduced[static_cast<size_t>(num_reduced++)] = d;
      plan.reduce_numel *= in.sizes[d];
    } else {
      append_dim<2>({&plan.kept_in, &plan.kept_out}, in.sizes[d], {in.strides[d], out.strides[d]});
      plan.num_outputs *= in.sizes[d];
    }
  }
  // Largest stride outermost, so the innermost reduced loop walks memory in order.
  std::stable_sort(reduced.begin(), reduced.begin() + num_reduced,
                   [&](int a, int b) { return std::abs(in.strides[a]) > std::abs(in.strides[b]); });
  for (int i = 0; i < num_reduced; ++i) {
    const int d = reduced[static_cast<size_t>(i)];
    append_dim<1>({&plan.red}, in.sizes[d], {in.strides[d]});
  }
  return plan;
}

// How one reduction call spreads over threads, decided from sizes only (never the thread count),
// so a given input always sums in the same order.
struct ReduceSchedule {
  bool outputs_parallel = false;  // threads take whole outputs
  bool chunked = false;           // each output is split into kReduceChunk-element chunks
};

inline ReduceSchedule schedule_for(int64_t num_outputs, int64_t reduce_numel) {
  if (num_outputs * reduce_numel < kParallelThreshold || omp_in_parallel()) return {};
  if (num_outputs >= kMinParallelOutputs) return {true, false};
  return {false, reduce_numel > kReduceChunk};
}

// Calls fn(j) for j in [0, count), spread over threads when `parallel`.
template <typename Fn>
void for_each_output(int64_t count, bool parallel, Fn&& fn) {
  if (!parallel) {
    for (int64_t j = 0; j < count; ++j) fn(j);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < count; ++j) fn(j);
}

// Folds the `red` sub-tensor starting at `base` into a copy of `init` (Acc: row(p, stride_bytes,
// n) folds one row, merge(other) appends a later part). Chunked: fixed-size chunks on several
// threads, merged in chunk order.
template <typename Acc>
Acc reduce_range(const Operand& red, const char* base, const Acc& init, bool chunked) {
  const int64_t n = red.numel();
  const int64_t es = static_cast<int64_t>(element_size(red.dtype));
  if (red.ndim <= 1 && !chunked) {
    Acc acc = init;
    acc.row(base, red.ndim == 0 ? 0 : red.strides[0] * es, n);
    return acc;
  }
  const LoopNest<1> nest = LoopNest<1>::make({&red});
  const std::array<char*, 1> start = {const_cast<char*>(base)};
  auto fold = [&](Acc& acc, int64_t begin, int64_t end) {
    nest.run(start, begin, end, [&](auto p, auto s, int64_t len) { acc.row(p[0], s[0], len); });
  };
  if (!chunked || n <= kReduceChunk) {
    Acc acc = init;
    fold(acc, 0, n);
    return acc;
  }
  const int64_t num_chunks = (n + kReduceChunk - 1) / kReduceChunk;
  std::vector<Acc> parts(static_cast<size_t>(num_chunks), init);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < num_chunks; ++c) {
    fold(parts[static_cast<size_t>(c)], c * kReduceChunk, std::min(n, (c + 1) * kReduceChunk));
  }
  Acc acc = init;
  for (const Acc& part : parts) acc.merge(part);
  return acc;
}

// ---- row primitives on contiguous rows ----

// Sum of f(x) over p[0, n): lanes of type L within blocks of kReduceBlock, blocks added in double.
template <typename L, typename T, typename F>
double lane_sum(const T* p, int64_t n, F f) {
  constexpr int kLanes = 128 / static_cast<int>(sizeof(L));  // two 512-bit registers
  double total = 0.0;
  for (int64_t b = 0; b < n; b += kReduceBlock) {
    const int64_t m = std::min(kReduceBlock, n - b);
    const T* q = p + b;
    L lanes[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= m; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) lanes[l] += f(to_acc<L>(q[i + l]));
    }
    L s = 0;
    for (int l = 0; l < kLanes; ++l) s += lanes[l];
    for (; i < m; ++i) s += f(to_acc<L>(q[i]));
    total += static_cast<double>(s);
  }
  return total;
}

// pick() folded over p[0, n) starting from init, with independent lanes.
template <bool kIsMax, typename C, typename T>
C lane_extreme(const T* p, int64_t n, C init) {
  constexpr int kLanes = std::max(8, 128 / static_cast<int>(sizeof(C)));
  static_assert((kLanes & (kLanes - 1)) == 0, "the lanes are folded in halves");
  C lanes[kLanes];
  for (int l = 0; l < kLanes; ++l) lanes[l] = init;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = pick<kIsMax>(lanes[l], to_acc<C>(p[i + l]));
  }
  // The lanes folded in halves (each step a vector operation; one lane after another would be a
  // chain of kLanes dependent picks, the most of a short row's time: softmax's rows of 64).
  for (int half = kLanes / 2; half > 0; half /= 2) {
    for (int l = 0; l < half; ++l) lanes[l] = pick<kIsMax>(lanes[l], lanes[l + half]);
  }
  C acc = lanes[0];
  for (; i < n; ++i) acc = pick<kIsMax>(acc, to_acc<C>(p[i]));
  return acc;
}

}  // namespace memgrad::kernels::cpu
