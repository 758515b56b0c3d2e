// cuBLAS status checks and the operand descriptions kernel-launch errors carry.
#include "kernels/cuda/cuda_check.h"

#include <cublas_v2.h>

#include "kernels/cuda/launch.h"

namespace memgrad::kernels::cuda {

void check_cublas(int status, std::string_view call, std::string_view context,
                  std::source_location where) {
  if (status == CUBLAS_STATUS_SUCCESS) [[likely]] return;
  const auto s = static_cast<cublasStatus_t>(status);
  std::string message = fmt::format("[cuda] {} failed: {} ({}) at {}:{}", call,
                                    cublasGetStatusName(s), cublasGetStatusString(s),
                                    where.file_name(), where.line());
  if (!context.empty()) message += fmt::format("; {}", context);
  throw CudaError(std::move(message), std::string(call), status);
}

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

}  // namespace memgrad::kernels::cuda
