// Device-side helpers for the CUDA kernel files (included by .cu files only): the storage type
// of each dtype, conversions that round exactly as the CPU backend does, loads and stores of a
// dtype known only at run time, and warp/block reductions.
//
// Conversions: float16 and bfloat16 go through float both ways (__half2float, __float2half_rn,
// __bfloat162float, __float2bfloat16_rn: round to nearest even, like Eigen::half and
// Eigen::bfloat16 on the CPU), so a double is rounded to float first and then to 16 bits, as the
// CPU's store_as does; a float becomes int64 through cast_to (NaN and out-of-range
// values give INT64_MIN, as on the CPU, where the device's own conversion would saturate). The
// rounding helpers (mul_rn, add_rn) are kernels/scalar_math.h's, shared with the CPU.
// Reductions: group_reduce<G> combines one value per thread of a group of G threads (1, a warp,
// or a 256-thread block) with a fixed butterfly-then-in-order tree, so results do not depend on
// timing; every thread of the group gets the result.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/launch.h"
#include "kernels/scalar_math.h"

namespace memgrad::kernels::cuda {

// A type carried through dispatch without constructing it.
template <typename T>
struct Tag {
  using type = T;
};

// Calls fn(Tag<T>{}) with T the device storage type of `dtype`.
template <typename Fn>
decltype(auto) dispatch_storage(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn(Tag<float>{});
    case DType::Float64: return fn(Tag<double>{});
    case DType::Float16: return fn(Tag<__half>{});
    case DType::BFloat16: return fn(Tag<__nv_bfloat16>{});
    case DType::Int64: return fn(Tag<int64_t>{});
    case DType::Bool: return fn(Tag<bool>{});
  }
  return fn(Tag<float>{});
}

// Calls fn(Tag<T>{}) for the floating storage type of `dtype` (float for anything not
// float64, float16 or bfloat16: the CPU's dispatch_floating).
template <typename Fn>
decltype(auto) dispatch_floating(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float64: return fn(Tag<double>{});
    case DType::Float16: return fn(Tag<__half>{});
    case DType::BFloat16: return fn(Tag<__nv_bfloat16>{});
    default: return fn(Tag<float>{});
  }
}

// __half or __nv_bfloat16: stored in 16 bits, computed in float.
template <typename T>
inline constexpr bool is_reduced_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// Float16 and BFloat16 compute in float; every other dtype in itself (the CPU's compute_t).
template <typename T>
using compute_t = std::conditional_t<is_reduced_v<T>, float, T>;

// ---- conversions ----

// A stored element as compute type C.
template <typename C, typename T>
__device__ __forceinline__ C to_compute(T x) {
  if constexpr (std::is_same_v<T, __half>) {
    return cast_to<C>(__half2float(x));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return cast_to<C>(__bfloat162float(x));
  } else {
    return cast_to<C>(x);
  }
}

// A computed value stored as T.
template <typename T, typename C>
__device__ __forceinline__ T from_compute(C v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(v));
  } else {
    return cast_to<T>(v);
  }
}

// Reads one element of any dtype as C.
template <typename C>
__device__ __forceinline__ C load_as(const char* p, DType dtype) {
  switch (dtype) {
    case DType::Float32: return cast_to<C>(*reinterpret_cast<const float*>(p));
    case DType::Float64: return cast_to<C>(*reinterpret_cast<const double*>(p));
    case DType::Float16: return cast_to<C>(__half2float(*reinterpret_cast<const __half*>(p)));
    case DType::BFloat16:
      return cast_to<C>(__bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(p)));
    case DType::Int64: return static_cast<C>(*reinterpret_cast<const int64_t*>(p));
    case DType::Bool: return static_cast<C>(*reinterpret_cast<const bool*>(p));
  }
  return C{};
}

// Writes `v` into one element of any dtype.
template <typename C>
__device__ __forceinline__ void store_as(char* p, DType dtype, C v) {
  switch (dtype) {
    case DType::Float32: *reinterpret_cast<float*>(p) = static_cast<float>(v); return;
    case DType::Float64: *reinterpret_cast<double*>(p) = static_cast<double>(v); return;
    case DType::Float16:
      *reinterpret_cast<__half*>(p) = __float2half_rn(static_cast<float>(v));
      return;
    case DType::BFloat16:
      *reinterpret_cast<__nv_bfloat16*>(p) = __float2bfloat16_rn(static_cast<float>(v));
      return;
    case DType::Int64: *reinterpret_cast<int64_t*>(p) = cast_to<int64_t>(v); return;
    case DType::Bool: *reinterpret_cast<bool*>(p) = static_cast<bool>(v); return;
  }
}

// ---- reductions across threads ----

// `v` from the lane `mask` away (butterfly), for any trivially copyable type.
template <typename A>
__device__ __forceinline__ A shfl_xor(A v, int mask) {
  constexpr int kWords = static_cast<int>((sizeof(A) + 3) / 4);
  int words[kWords];
  memcpy(words, &v, sizeof(A));
#pragma unroll
  for (int i = 0; i < kWords; ++i) words[i] = __shfl_xor_sync(0xffffffffu, words[i], mask);
  memcpy(&v, words, sizeof(A));
  return v;
}

// Combines the values of the G threads of a group (G = 1, 32, or blockDim.x = 256; groups are
// consecutive threads). Every thread of the group gets the result. G = 256 uses __syncthreads:
// the whole block must call it.
template <int G, typename A, typename F>
__device__ __forceinline__ A group_reduce(A v, F combine) {
  static_assert(G == 1 || G == 32 || G == kBlockThreads, "groups are 1, 32 or 256 threads");
  if constexpr (G == 1) {
    return v;
  } else {
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) v = combine(v, shfl_xor(v, m));
    if constexpr (G == 32) {
      return v;
    } else {
      constexpr int kWarps = G / 32;
      __shared__ __align__(16) unsigned char raw[kWarps * sizeof(A)];
      A* slots = reinterpret_cast<A*>(raw);
      if (threadIdx.x % 32 == 0) slots[threadIdx.x / 32] = v;
      __syncthreads();
      A total = slots[0];
      for (int w = 1; w < kWarps; ++w) total = combine(total, slots[w]);
      __syncthreads();  // the slots may be reused by the next call
      return total;
    }
  }
}

// Flat index of the calling thread and the grid-stride step.
__device__ __forceinline__ int64_t thread_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace memgrad::kernels::cuda
