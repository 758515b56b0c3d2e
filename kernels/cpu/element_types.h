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

// Float16 computes in float; every other dtype in itself.
template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, half>, float, T>;

// Reads one element of any dtype as T.
template <typename T>
inline T load_as(const char* p, DType dtype) {
  switch (dtype) {
    case DType::Float32: return cast_to<T>(*reinterpret_cast<const float*>(p));
    case DType::Float64: return cast_to<T>(*reinterpret_cast<const double*>(p));
    case DType::Float16: return cast_to<T>(static_cast<float>(*reinterpret_cast<const half*>(p)));
    case DType::Int64: return static_cast<T>(*reinterpret_cast<const int64_t*>(p));
    case DType::Bool: return static_cast<T>(*reinterpret_cast<const bool*>(p));
  }
  return T{};
}

// Writes `v` into one element of any dtype.
template <typename T>
inline void store_as(char* p, DType dtype, T v) {
  switch (dtype) {
    case DType::Float32: *reinterpret_cast<float*>(p) = static_cast<float>(v); return;
    case DType::Float64: *reinterpret_cast<double*>(p) = static_cast<double>(v); return;
    case DType::Float16: *reinterpret_cast<half*>(p) = half(static_cast<float>(v)); return;
    case DType::Int64: *reinterpret_cast<int64_t*>(p) = cast_to<int64_t>(v); return;
    case DType::Bool: *reinterpret_cast<bool*>(p) = static_cast<bool>(v); return;
  }
}

// Calls fn(T{}) with T the C++ type of `dtype` (float, double, half, int64_t, bool).
template <typename Fn>
decltype(auto) dispatch_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn(float{});
    case DType::Float64: return fn(double{});
    case DType::Float16: return fn(half{});
    case DType::Int64: return fn(int64_t{});
    case DType::Bool: return fn(bool{});
  }
  return fn(float{});
}

// Like dispatch_dtype for the floating dtypes only.
template <typename Fn>
decltype(auto) dispatch_floating(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float64: return fn(double{});
    case DType::Float16: return fn(half{});
    default: return fn(float{});
  }
}

}  // namespace memgrad::kernels::cpu
