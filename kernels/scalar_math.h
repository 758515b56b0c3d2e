// Scalar arithmetic shared by the CPU and CUDA kernels: products and sums rounded one at a time,
// NaN tests and |x| for any compute type, and the checked float to int64 conversion.
// Header-only and free of CUDA headers; the MEMGRAD_HOST_DEVICE functions are built by the C++
// compiler for the host and by nvcc for the host and the device.
//
// Rounding: host code is compiled with -ffp-contract=off (kernels/meson.build), so a * b + c is
// two roundings there; nvcc may contract it into an FMA unless the formula writes mul_rn /
// add_rn, which are the _rn intrinsics on the device and plain operators on the host.
//
// Math functions: the formula headers call std::exp, std::log, std::sqrt, std::tanh, std::erf,
// std::pow, std::sin, std::cos, std::abs and std::isfinite on both sides. On the device nvcc
// resolves the float and double overloads to CUDA's math library (std::exp(float) is expf,
// std::exp(double) is exp: the same PTX with nvcc 13.0), so the formulas need no wrappers.
// glibc's and CUDA's transcendental functions may differ in the last bit or two; everything
// else rounds the same on both.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/host_device.h"

namespace memgrad::kernels {

// ---- one rounding per operation ----

// a * b rounded once, never fused with a following addition.
template <typename C>
MEMGRAD_HOST_DEVICE inline C mul_rn(C a, C b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<C, float>)
    return __fmul_rn(a, b);
  else if constexpr (std::is_same_v<C, double>)
    return __dmul_rn(a, b);
  else
    return static_cast<C>(a * b);
#else
  return static_cast<C>(a * b);
#endif
}

// a + b rounded once, never fused with a preceding multiplication.
template <typename C>
MEMGRAD_HOST_DEVICE inline C add_rn(C a, C b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<C, float>)
    return __fadd_rn(a, b);
  else if constexpr (std::is_same_v<C, double>)
    return __dadd_rn(a, b);
  else
    return static_cast<C>(a + b);
#else
  return static_cast<C>(a + b);
#endif
}

// a * b + c rounded once (a fused multiply-add: std::fma on the host, exact whether or not the
// CPU has the instruction; __fmaf_rn / __fma_rn on the device). PyTorch's CPU kernels compute
// `x.add_(y, alpha=a)` as fmadd(y, a, x); the SGD formulas follow it.
template <typename C>
MEMGRAD_HOST_DEVICE inline C fma_rn(C a, C b, C c) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<C, float>)
    return __fmaf_rn(a, b, c);
  else if constexpr (std::is_same_v<C, double>)
    return __fma_rn(a, b, c);
  else
    return static_cast<C>(a * b + c);
#else
  return std::fma(a, b, c);
#endif
}

// ---- NaN and |x| ----

template <typename C>
MEMGRAD_HOST_DEVICE inline bool is_nan(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return x != x;
  } else {
    return false;
  }
}

// |x|: the sign bit cleared for floating C (abs(-0.0) is +0.0, a NaN stays a NaN), -x below
// zero for integers.
template <typename C>
MEMGRAD_HOST_DEVICE inline C abs_of(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::abs(x);
  } else {
    return x < C(0) ? static_cast<C>(-x) : x;
  }
}

// ---- conversion ----

// A value as T, where T may be int64 and the value a float: truncated toward zero inside int64;
// NaN and values outside int64 give INT64_MIN (the x86 "integer indefinite" value, which is what
// PyTorch's CPU kernels produce), where a plain cast would be undefined behaviour on the host
// and saturate on the device.
template <typename T, typename V>
MEMGRAD_HOST_DEVICE inline T cast_to(V v) {
  if constexpr (std::is_same_v<T, int64_t> && std::is_floating_point_v<V>) {
    constexpr V kTwoTo63 = V(9223372036854775808.0);
    return v >= -kTwoTo63 && v < kTwoTo63 ? static_cast<int64_t>(v)
                                          : std::numeric_limits<int64_t>::min();
  } else {
    return static_cast<T>(v);
  }
}

}  // namespace memgrad::kernels
