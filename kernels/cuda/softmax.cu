// CUDA softmax / log_softmax along one dim, and their backward.
//
// A "row" is the line of elements along `dim` through one position of the other dims; any
// strides and any floating dtypes (mixed too), computing in float (double when an operand is
// float64). Two paths:
//   warp   rows of at most 1024 elements: one warp per row (8 rows per 256-thread block) keeps
//          the row in registers (32 values per lane), so the input is read once and the output
//          written once: max, then sum of exp(x - max), then the outputs;
//   block  longer rows: one 256-thread block per row; a first pass computes the max and the
//          normaliser together with the online rule (Milakov and Gimelshein, 2018: when a larger
//          value arrives, the running sum is rescaled by exp(old max - new max)), a second pass
//          reads x again and writes y. Two reads instead of three.
// Special values end as on the CPU: a NaN or +inf anywhere makes the row NaN, a row of -inf is
// NaN, -inf elements of other rows give 0 (softmax) or -inf (log_softmax).
// Backward (y is the forward output): softmax gx = y (g - sum(g y)); log_softmax
// gx = g - exp(y) sum(g). Every pass is elementwise within a row and each element is read and
// written by the same thread, so `out` may alias `in` (and grad_in grad_out). No temporaries.
// The per-element formulas are kernels/softmax_formulas.h (shared with the CPU's strided path);
// max with NaN propagation is kernels/reduce_formulas.h's pick.
#include "kernels/cuda/cuda_backend.h"

#include <limits>

#include "allocator/cuda_check.h"
#include "kernels/cuda/cuda_handles.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/reduce_formulas.h"
#include "kernels/softmax_formulas.h"

namespace memgrad::kernels::cuda {
namespace {

// Values per lane the warp path keeps in registers (rows up to 32 x this).
constexpr int kPerLane = 32;
constexpr int64_t kWarpRowLimit = 32 * kPerLane;

// K operands seen as rows along `dim`; strides in elements.
template <int K>
struct RowGeometry {
  int rest_ndim = 0;
  int64_t rest_sizes[kMaxDims] = {};
  int64_t rest_strides[K][kMaxDims] = {};
  int64_t stride[K] = {};  // along dim
  int64_t length = 0;
  int64_t num_rows = 1;
  char* data[K] = {};
  DType dtype[K] = {};
  int64_t es[K] = {};

  // Byte address of element 0 of row j in each operand.
  __device__ void row(int64_t j, char* (&base)[K]) const {
    int64_t off[K] = {};
    for (int d = rest_ndim - 1; d >= 0 && j > 0; --d) {
      const int64_t c = j % rest_sizes[d];
      j /= rest_sizes[d];
      for (int k = 0; k < K; ++k) off[k] += c * rest_strides[k][d];
    }
    for (int k = 0; k < K; ++k) base[k] = data[k] + off[k] * es[k];
  }
  template <typename C>
  __device__ C load(const char* base, int k, int64_t i) const {
    return load_as<C>(base + i * stride[k] * es[k], dtype[k]);
  }
  template <typename C>
  __device__ void store(char* base, int k, int64_t i, C v) const {
    store_as<C>(base + i * stride[k] * es[k], dtype[k], v);
  }
};

// The running max and normaliser sum(exp(x - max)) of part of a row.
template <typename C>
struct MaxSum {
  C max;
  C sum;
};

template <typename C>
__device__ __forceinline__ MaxSum<C> online_add(MaxSum<C> st, C x) {
  constexpr C kInf = std::numeric_limits<C>::infinity();
  if (x == -kInf) return st;             // contributes exp(-inf) = 0
  if (x == kInf) return {kInf, C(NAN)};  // the CPU's sum has exp(inf - inf) = NaN
  if (x > st.max) return {x, st.sum * std::exp(st.max - x) + C(1)};
  return {st.max, st.sum + std::exp(x - st.max)};  // a NaN x makes the sum NaN
}

template <typename C>
__device__ __forceinline__ MaxSum<C> online_merge(MaxSum<C> a, MaxSum<C> b) {
  const C m = a.max > b.max ? a.max : b.max;
  const C sa = a.sum == C(0) ? C(0) : a.sum * std::exp(a.max - m);
  const C sb = b.sum == C(0) ? C(0) : b.sum * std::exp(b.max - m);
  return {m, sa + sb};
}

// ---- kernels section ----

template <typename C>
__global__ void softmax_warp_kernel(RowGeometry<2> g, bool log) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t per_block = blockDim.x / 32;
  for (int64_t j = blockIdx.x * per_block + threadIdx.x / 32; j < g.num_rows;
       j += static_cast<int64_t>(gridDim.x) * per_block) {
    char* base[2];
    g.row(j, base);
    C v[kPerLane];
    C top = -std::numeric_limits<C>::infinity();
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int64_t i = lane + 32 * t;
      if (i < g.length) {
        v[t] = g.template load<C>(base[1], 1, i);
        top = pick<true>(top, v[t]);
      }
    }
    top = group_reduce<32>(top, [](C a, C b) { return pick<true>(a, b); });
    C sum = 0;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      if (lane + 32 * t < g.length) {
        const C e = std::exp(v[t] - top);
        sum += e;
        if (!log) v[t] = e;
      }
    }
    sum = group_reduce<32>(sum, [](C a, C b) { return a + b; });
    const C shift = top + std::log(sum), inv = C(1) / sum;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int64_t i = lane + 32 * t;
      if (i < g.length) g.store(base[0], 0, i, log ? v[t] - shift : v[t] * inv);
    }
  }
}

template <typename C>
__global__ void softmax_block_kernel(RowGeometry<2> g, bool log) {
  for (int64_t j = blockIdx.x; j < g.num_rows; j += gridDim.x) {
    char* base[2];
    g.row(j, base);
    MaxSum<C> st{-std::numeric_limits<C>::infinity(), C(0)};
    for (int64_t i = threadIdx.x; i < g.length; i += blockDim.x) {
      st = online_add(st, g.template load<C>(base[1], 1, i));
    }
    st = group_reduce<kBlockThreads>(st,
                                     [](MaxSum<C> a, MaxSum<C> b) { return online_merge(a, b); });
    const C shift = st.max + std::log(st.sum), inv = C(1) / st.sum;
    for (int64_t i = threadIdx.x; i < g.length; i += blockDim.x) {
      const C x = g.template load<C>(base[1], 1, i);
      g.store(base[0], 0, i, softmax_value(log, x, st.max, shift, inv));
    }
  }
}

// Operands: 0 grad_in, 1 grad_out, 2 out (the forward's y).
template <typename C>
__global__ void softmax_backward_warp_kernel(RowGeometry<3> g, bool log) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t per_block = blockDim.x / 32;
  for (int64_t j = blockIdx.x * per_block + threadIdx.x / 32; j < g.num_rows;
       j += static_cast<int64_t>(gridDim.x) * per_block) {
    char* base[3];
    g.row(j, base);
    C gv[kPerLane], yv[kPerLane];
    C sum = 0;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int64_t i = lane + 32 * t;
      if (i < g.length) {
        gv[t] = g.template load<C>(base[1], 1, i);
        yv[t] = g.template load<C>(base[2], 2, i);
        sum += softmax_grad_term(log, gv[t], yv[t]);
      }
    }
    sum = group_reduce<32>(sum, [](C a, C b) { return a + b; });
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int64_t i = lane + 32 * t;
      if (i < g.length) {
        g.store(base[0], 0, i, softmax_grad_value(log, gv[t], yv[t], sum));
      }
    }
  }
}

template <typename C>
__global__ void softmax_backward_block_kernel(RowGeometry<3> g, bool log) {
  for (int64_t j = blockIdx.x; j < g.num_rows; j += gridDim.x) {
    char* base[3];
    g.row(j, base);
    C sum = 0;
    for (int64_t i = threadIdx.x; i < g.length; i += blockDim.x) {
      sum += softmax_grad_term(log, g.template load<C>(base[1], 1, i),
                               g.template load<C>(base[2], 2, i));
    }
    sum = group_reduce<kBlockThreads>(sum, [](C a, C b) { return a + b; });
    for (int64_t i = threadIdx.x; i < g.length; i += blockDim.x) {
      const C gi = g.template load<C>(base[1], 1, i);
      const C yi = g.template load<C>(base[2], 2, i);
      g.store(base[0], 0, i, softmax_grad_value(log, gi, yi, sum));
    }
  }
}

// ---- launchers section ----

template <int K>
RowGeometry<K> make_rows(const std::array<const Operand*, K>& ops, int dim) {
  RowGeometry<K> g;
  for (int k = 0; k < K; ++k) {
    g.data[k] = static_cast<char*>(ops[k]->data);
    g.dtype[k] = ops[k]->dtype;
    g.es[k] = static_cast<int64_t>(element_size(ops[k]->dtype));
    g.stride[k] = ops[k]->strides[dim];
  }
  g.length = ops[0]->sizes[dim];
  for (int d = 0; d < ops[0]->ndim; ++d) {
    const int64_t size = ops[0]->sizes[d];
    if (d == dim) continue;
    g.num_rows *= size;
    if (size == 1) continue;
    const int n = g.rest_ndim;
    bool merge = n > 0;
    for (int k = 0; k < K && merge; ++k)
      merge = g.rest_strides[k][n - 1] == ops[k]->strides[d] * size;
    const int slot = merge ? n - 1 : n;
    g.rest_sizes[slot] = merge ? g.rest_sizes[slot] * size : size;
    for (int k = 0; k < K; ++k) g.rest_strides[k][slot] = ops[k]->strides[d];
    if (!merge) ++g.rest_ndim;
  }
  return g;
}

template <int K>
bool needs_double(const std::array<const Operand*, K>& ops) {
  for (const Operand* op : ops) {
    if (op->dtype == DType::Float64) return true;
  }
  return false;
}

}  // namespace

// ---- entry points ----

void CudaBackend::softmax(const Operand& out, const Operand& in, int dim, bool log) {
  const std::array<const Operand*, 2> ops = {&out, &in};
  const RowGeometry<2> g = make_rows<2>(ops, dim);
  if (g.length == 0 || g.num_rows == 0) return;
  DeviceGuard guard(device_);
  cudaStream_t stream = current_cuda_stream(device_);
  const bool warp = g.length <= kWarpRowLimit;
  const unsigned grid = warp ? grid_for(g.num_rows, kBlockThreads / 32) : grid_for(g.num_rows, 1);
  if (needs_double<2>(ops)) {
    if (warp)
      softmax_warp_kernel<double><<<grid, kBlockThreads, 0, stream>>>(g, log);
    else
      softmax_block_kernel<double><<<grid, kBlockThreads, 0, stream>>>(g, log);
  } else {
    if (warp)
      softmax_warp_kernel<float><<<grid, kBlockThreads, 0, stream>>>(g, log);
    else
      softmax_block_kernel<float><<<grid, kBlockThreads, 0, stream>>>(g, log);
  }
  check_launch(warp ? "softmax_warp_kernel" : "softmax_block_kernel", ops);
}

void CudaBackend::softmax_backward(const Operand& grad_in, const Operand& grad_out,
                                   const Operand& out, int dim, bool log) {
  const std::array<const Operand*, 3> ops = {&grad_in, &grad_out, &out};
  const RowGeometry<3> g = make_rows<3>(ops, dim);
  if (g.length == 0 || g.num_rows == 0) return;
  DeviceGuard guard(device_);
  cudaStream_t stream = current_cuda_stream(device_);
  const bool warp = g.length <= kWarpRowLimit;
  const unsigned grid = warp ? grid_for(g.num_rows, kBlockThreads / 32) : grid_for(g.num_rows, 1);
  if (needs_double<3>(ops)) {
    if (warp)
      softmax_backward_warp_kernel<double><<<grid, kBlockThreads, 0, stream>>>(g, log);
    else
      softmax_backward_block_kernel<double><<<grid, kBlockThreads, 0, stream>>>(g, log);
  } else {
    if (warp)
      softmax_backward_warp_kernel<float><<<grid, kBlockThreads, 0, stream>>>(g, log);
    else
      softmax_backward_block_kernel<float><<<grid, kBlockThreads, 0, stream>>>(g, log);
  }
  check_launch(warp ? "softmax_backward_warp_kernel" : "softmax_backward_block_kernel", ops);
}

}  // namespace memgrad::kernels::cuda
