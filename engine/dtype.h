// dtypes as users see them: names, promotion, and the C++ type of each.
//
// memgrad has six dtypes: float32 (the default), float64 (gradcheck), float16 and bfloat16
// (autocast, master-weights training), int64 (indices, labels) and bool (masks, comparisons).
// Mixed inputs promote like PyTorch's tensor-tensor promotion: bool < int64 < float16, bfloat16
// < float32 < float64, and float16 with bfloat16 gives float32 (neither holds the other).
#pragma once

#include <string>
#include <string_view>

#include "kernels/dtype.h"

namespace memgrad {

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kBool = DType::Bool;

// "float32", "float64", "float16", "bfloat16", "int64", "bool" (PyTorch's spelling without
// "torch.").
std::string_view dtype_name(DType dtype);

// The dtype named `name` (also accepts "float", "double", "half", "long"). Throws DTypeError.
DType parse_dtype(std::string_view name);

// The result dtype of an op on inputs of dtypes a and b (PyTorch's promotion lattice).
DType promote_types(DType a, DType b);

// The C++ type that holds one element of each dtype.
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::Float32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::Float64;
}
template <>
constexpr DType dtype_of<Half>() {
  return DType::Float16;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::BFloat16;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::Int64;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::Bool;
}

}  // namespace memgrad
