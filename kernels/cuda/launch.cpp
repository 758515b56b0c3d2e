// Host-side launch helpers: operand descriptions for launch errors, element bit patterns.
#include "kernels/cuda/launch.h"

#include <cstring>

#include <fmt/format.h>

#include "allocator/cuda_check.h"
#include "kernels/scalar_math.h"

namespace memgrad::kernels::cuda {

std::string describe(const Operand& op) {
  std::string sizes = "[";
  for (int d = 0; d < op.ndim; ++d) sizes += fmt::format("{}{}", d > 0 ? ", " : "", op.sizes[d]);
  std::string strides = "(";
  for (int d = 0; d < op.ndim; ++d) {
    strides += fmt::format("{}{}", d > 0 ? ", " : "", op.strides[d]);
  }
  return fmt::format("{}] {} strides {})", sizes, dtype_label(op.dtype), strides);
}

std::string describe(const Operand* const* ops, size_t count) {
  std::string out;
  for (size_t k = 0; k < count; ++k) out += (k == 0 ? "operands " : ", ") + describe(*ops[k]);
  return out;
}

const char* dtype_label(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "?";
}

void check_launch(const char* kernel, const Operand* const* ops, size_t count,
                  std::source_location where) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) [[unlikely]] {
    throw_cuda_error(status, fmt::format("launch of {}", kernel), describe(ops, count), where);
  }
}

uint64_t element_bits(DType dtype, double value) {
  uint64_t bits = 0;
  switch (dtype) {
    case DType::Float32: {
      const auto v = static_cast<float>(value);
      std::memcpy(&bits, &v, sizeof v);
      break;
    }
    case DType::Float64: std::memcpy(&bits, &value, sizeof value); break;
    case DType::Float16: bits = float_to_half(static_cast<float>(value)).bits; break;
    case DType::BFloat16: bits = float_to_bfloat16(static_cast<float>(value)).bits; break;
    case DType::Int64: {
      // cast_to, as the CPU's fill and masked_fill: NaN and values outside int64 give
      // INT64_MIN, where a plain cast is undefined (and saturates on an ARM host).
      const auto v = cast_to<int64_t>(value);
      std::memcpy(&bits, &v, sizeof v);
      break;
    }
    case DType::Bool: bits = value != 0.0 ? 1 : 0; break;
  }
  return bits;
}

}  // namespace memgrad::kernels::cuda
