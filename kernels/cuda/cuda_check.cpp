// cuBLAS status checks (the CUDA runtime ones are inline in the header).
#include "kernels/cuda/cuda_check.h"

#include <cublas_v2.h>

#include <fmt/format.h>

#include "kernels/cuda/cublas_api.h"

namespace memgrad::kernels::cuda {

void check_cublas(int status, std::string_view call, std::string_view context,
                  std::source_location where) {
  if (status == CUBLAS_STATUS_SUCCESS) [[likely]] return;
  const auto s = static_cast<cublasStatus_t>(status);
  const CublasApi& api = cublas_api();  // a status implies cuBLAS is loaded
  std::string message = fmt::format("[cuda] {} failed: {} ({}) at {}:{}", call,
                                    api.status_name(s), api.status_string(s), where.file_name(),
                                    where.line());
  if (!context.empty()) message += fmt::format("; {}", context);
  throw CudaError(std::move(message), std::string(call), status);
}

}  // namespace memgrad::kernels::cuda
