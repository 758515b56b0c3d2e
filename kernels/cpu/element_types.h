// Element types on the host: the C++ type of each dtype, the type kernels compute in, and
// loads/stores that convert between dtypes (the slow path for mixed-dtype operands; float to
// int64 through cast_to, kernels/scalar_math.h, as on the CUDA backend).
// Included by kernels/cpu/*.cpp only (it includes Eigen).
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/dtype.h"
#include "kernels/scalar_math.h"

namespace memgrad::kernels::cpu {

using half = Eigen::half;
using bfloat16 = Eigen::bfloat16;

// half or bfloat16: stored in 16 bits, computed in float.
template <typename T>
inline constexpr bool is_reduced_v = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

// Float16 and BFloat16 compute in float; every other dtype in itself.
template <typename T>
using compute_t = std::conditional_t<is_reduced_v<T>, float, T>;

// One element of storage type S read as T: half and bfloat16 go through float, floating values
// become int64 through cast_to.
template <typename T, typename S>
T convert_from(S v) {
  if constexpr (is_reduced_v<S>) {
    return cast_to<T>(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<S>) {
    return cast_to<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

// `v` of type T stored as storage type S (the inverse of convert_from).
template <typename S, typename T>
S convert_to(T v) {
  if constexpr (is_reduced_v<S>) {
    return S(static_cast<float>(v));
  } else if constexpr (std::is_same_v<S, int64_t>) {
    return cast_to<int64_t>(v);
  } else {
    return static_cast<S>(v);
  }
}

// Calls fn(T{}) with T the C++ type of `dtype` (float, double, half, bfloat16, int64_t, bool).
template <typename Fn>
decltype(auto) dispatch_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn(float{});
    case DType::Float64: return fn(double{});
    case DType::Float16: return fn(half{});
    case DType::BFloat16: return fn(bfloat16{});
    case DType::Int64: return fn(int64_t{});
    case DType::Bool: return fn(bool{});
  }
  return fn(float{});
}

// Reads one element of any dtype as T.
template <typename T>
inline T load_as(const char* p, DType dtype) {
  return dispatch_dtype(
      dtype, [p](auto tag) { return convert_from<T>(*reinterpret_cast<const decltype(tag)*>(p)); });
}

// Writes `v` into one element of any dtype.
template <typename T>
inline void store_as(char* p, DType dtype, T v) {
  dispatch_dtype(dtype, [p, v](auto tag) {
    using S = decltype(tag);
    *reinterpret_cast<S*>(p) = convert_to<S>(v);
  });
}

// Like dispatch_dtype for the floating dtypes only.
template <typename Fn>
decltype(auto) dispatch_floating(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float64: return fn(double{});
    case DType::Float16: return fn(half{});
    case DType::BFloat16: return fn(bfloat16{});
    default: return fn(float{});
  }
}

}  // namespace memgrad::kernels::cpu
