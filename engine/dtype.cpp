// dtype names and the promotion lattice.
#include "engine/dtype.h"

#include <fmt/format.h>

#include "engine/error.h"

namespace memgrad {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "unknown";
}

DType parse_dtype(std::string_view name) {
  if (name == "float32" || name == "float") return DType::Float32;
  if (name == "float64" || name == "double") return DType::Float64;
  if (name == "float16" || name == "half") return DType::Float16;
  if (name == "bfloat16") return DType::BFloat16;
  if (name == "int64" || name == "long") return DType::Int64;
  if (name == "bool") return DType::Bool;
  throw DTypeError(fmt::format("[dtype] unknown dtype '{}' (known: float32, float64, float16, "
                               "bfloat16, int64, bool)",
                               name),
                   "dtype", {});
}

DType promote_types(DType a, DType b) {
  // Rank along bool < int64 < float16, bfloat16 < float32 < float64; the two 16-bit floats
  // share a rank and meet in float32.
  auto rank = [](DType d) {
    switch (d) {
      case DType::Bool: return 0;
      case DType::Int64: return 1;
      case DType::Float16:
      case DType::BFloat16: return 2;
      case DType::Float32: return 3;
      case DType::Float64: return 4;
    }
    return 0;
  };
  if (a != b && is_reduced_float(a) && is_reduced_float(b)) return DType::Float32;
  return rank(a) >= rank(b) ? a : b;
}

}  // namespace memgrad
