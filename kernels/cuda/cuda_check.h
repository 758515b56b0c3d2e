// CUDA error handling for the kernels: the cuBLAS status check, GemmLayoutError, and the CUDA
// runtime check, CudaError and DeviceGuard of the allocator layer under their kernel names.
//
// A failing call throws CudaError naming the call as written, the error's name and text, and
// where it was made; kernel launches are checked with check_launch (kernels/cuda/launch.cuh),
// which adds the operand shapes. The runtime parts live in allocator/cuda_check.h, the lowest
// layer, because the allocator's CUDA sources need them too and may not include this layer.
// Included only by CUDA translation units: it includes cuda_runtime_api.h.
#pragma once

#include <source_location>
#include <string_view>

#include "allocator/cuda_check.h"

namespace memgrad {

// A GEMM operand whose strides cuBLAS cannot express: neither dim has unit stride, or the
// leading dimension is shorter than a row (column). The engine makes such operands contiguous
// before calling the kernel, so users see this only through the backend directly.
class GemmLayoutError : public CudaError {
 public:
  using CudaError::CudaError;
};

}  // namespace memgrad

namespace memgrad::kernels::cuda {

// The runtime check, its thrower and the device guard (allocator/cuda_check.h), by the names
// the kernels have always used.
using ::memgrad::detail::check_cuda;
using ::memgrad::detail::DeviceGuard;
using ::memgrad::detail::throw_cuda_error;

// Throws CudaError unless the cuBLAS status `status` is CUBLAS_STATUS_SUCCESS (defined in
// cuda_check.cpp, part of the kernels layer).
void check_cublas(int status, std::string_view call, std::string_view context = {},
                  std::source_location where = std::source_location::current());

}  // namespace memgrad::kernels::cuda

// Checks a cuBLAS call: MEMGRAD_CUBLAS_CHECK(cublasCreate(&handle)).
#define MEMGRAD_CUBLAS_CHECK(call) \
  ::memgrad::kernels::cuda::check_cublas(static_cast<int>(call), #call)
