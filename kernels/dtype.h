// Element types, shared by every layer that computes: the kernels, the engine, autograd.
//
// The enum lives here, in the lowest compute layer, because kernels switch on it; the engine's
// dtype.h adds names, promotion and casting rules on top. Half is the IEEE binary16 bit pattern
// (the same layout as Eigen::half and CUDA's __half), BFloat16 the upper half of a float32
// (Eigen::bfloat16, CUDA's __nv_bfloat16); kernels compute both in float and round on store.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memgrad {

enum class DType : uint8_t { Float32, Float64, Float16, Int64, Bool, BFloat16 };

inline constexpr int kNumDTypes = 6;

// Bytes per element.
constexpr size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Float16: return 2;
    case DType::BFloat16: return 2;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
  }
  return 0;
}

constexpr bool is_floating(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::Float16 ||
         dtype == DType::BFloat16;
}

// The 16-bit floating dtypes: stored in 2 bytes, computed in float32.
constexpr bool is_reduced_float(DType dtype) {
  return dtype == DType::Float16 || dtype == DType::BFloat16;
}

// An IEEE 754 binary16 value, stored as its bits. Convert with half_to_float / float_to_half.
struct Half {
  uint16_t bits = 0;
};

// A bfloat16 value (8 exponent bits like float32, 7 mantissa bits), stored as its bits.
struct BFloat16 {
  uint16_t bits = 0;
};

// Round-to-nearest-even conversions (the hardware instructions where the CPU has them).
float half_to_float(Half h);
Half float_to_half(float f);
float bfloat16_to_float(BFloat16 b);
BFloat16 float_to_bfloat16(float f);

}  // namespace memgrad
