// CUDA error handling: CudaError, the check helpers every runtime and cuBLAS call goes through,
// and DeviceGuard (RAII for the calling thread's current device).
//
// A failing call throws CudaError naming the call as written, the error's name and text, and
// where it was made; kernel launches are checked with check_launch (kernels/cuda/launch.cuh),
// which adds the operand shapes. The CUDA runtime parts are inline so the allocator's CUDA
// sources (allocator/cuda_memory.cpp, pinned_host_memory.cpp) use them without linking the
// kernels layer. Included only by CUDA translation units: it includes cuda_runtime_api.h.
#pragma once

#include <cuda_runtime_api.h>

#include <source_location>
#include <string>
#include <string_view>

#include "allocator/error.h"

namespace memgrad {

// A CUDA runtime, driver or cuBLAS call failed, or a kernel could not be launched. `call` is
// the call as written (or the kernel's name), `code` the cudaError_t or cublasStatus_t value.
class CudaError : public Error {
 public:
  CudaError(std::string message, std::string call, int code)
      : Error(std::move(message)), call(std::move(call)), code(code) {}
  std::string call;
  int code;
};

// A GEMM operand whose strides cuBLAS cannot express: neither dim has unit stride, or the
// leading dimension is shorter than a row (column). The engine makes such operands contiguous
// before calling the kernel, so users see this only through the backend directly.
class GemmLayoutError : public CudaError {
 public:
  using CudaError::CudaError;
};

}  // namespace memgrad

namespace memgrad::kernels::cuda {

// Throws CudaError for `code`, naming `call`, the error and `where`; `context` (operand
// shapes, sizes) is appended when not empty.
[[noreturn]] inline void throw_cuda_error(cudaError_t code, std::string_view call,
                                          std::string_view context, std::source_location where) {
  // Plain string building: this header is included by .cu files, and nvcc cannot compile fmt.
  std::string message = "[cuda] ";
  message.append(call).append(" failed: ").append(cudaGetErrorName(code)).append(" (");
  message.append(cudaGetErrorString(code)).append(") at ").append(where.file_name());
  message.append(":").append(std::to_string(where.line()));
  if (!context.empty()) message.append("; ").append(context);
  throw CudaError(std::move(message), std::string(call), static_cast<int>(code));
}

// Throws CudaError unless `code` is cudaSuccess.
inline void check_cuda(cudaError_t code, std::string_view call, std::string_view context = {},
                       std::source_location where = std::source_location::current()) {
  if (code != cudaSuccess) [[unlikely]] throw_cuda_error(code, call, context, where);
}

// Throws CudaError unless the cuBLAS status `status` is CUBLAS_STATUS_SUCCESS (defined in
// cuda_check.cpp, part of the kernels layer).
void check_cublas(int status, std::string_view call, std::string_view context = {},
                  std::source_location where = std::source_location::current());

// Makes `device` the calling thread's current device for its scope and restores the previous
// one after. Cheap when the device is already current (no cudaSetDevice call).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice(&previous)");
    if (previous_ != device) {
      check_cuda(cudaSetDevice(device), "cudaSetDevice(device)",
                 "device " + std::to_string(device));
      changed_ = true;
    }
  }
  ~DeviceGuard() {
    if (changed_) cudaSetDevice(previous_);  // cannot fail for a device that was current before
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace memgrad::kernels::cuda

// Checks a CUDA runtime call, naming it as written: MEMGRAD_CUDA_CHECK(cudaFree(ptr)).
#define MEMGRAD_CUDA_CHECK(call) ::memgrad::kernels::cuda::check_cuda((call), #call)
// Checks a cuBLAS call: MEMGRAD_CUBLAS_CHECK(cublasCreate(&handle)).
#define MEMGRAD_CUBLAS_CHECK(call) \
  ::memgrad::kernels::cuda::check_cublas(static_cast<int>(call), #call)
