// CUDA error handling, the one header for every room: CudaError, the runtime-call check and
// DeviceGuard (RAII for the calling thread's current device).
//
// A failing runtime call throws CudaError naming the call as written, the error's name and text,
// and where it was made. The allocator's CUDA sources (cuda_memory.cpp, pinned_host_memory.cpp)
// use it, and so do the kernels (the lowest room that needs CUDA holds it; the cuBLAS status
// check lives with the cuBLAS loader, kernels/cuda/cublas_api.h). Everything here is inline (no
// library to link) and allocates nothing on a device. Included only by CUDA translation units:
// it includes cuda_runtime_api.h.
#pragma once

#include <cuda_runtime_api.h>

#include <source_location>
#include <string>
#include <string_view>
#include <utility>

#include "allocator/error.h"

namespace memgrad {

// A CUDA runtime, driver or cuBLAS call failed, or a kernel could not be launched. `call` is
// the call as written (or the kernel's name), `code` the cudaError_t, CUresult or
// cublasStatus_t value.
class CudaError : public Error {
 public:
  CudaError(std::string message, std::string call, int code)
      : Error(std::move(message)), call(std::move(call)), code(code) {}
  std::string call;
  int code;
};

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
  if (code != cudaSuccess) [[unlikely]]
    throw_cuda_error(code, call, context, where);
}

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

}  // namespace memgrad

// Checks a CUDA runtime call, naming it as written: MEMGRAD_CUDA_CHECK(cudaFree(ptr)).
#define MEMGRAD_CUDA_CHECK(call) ::memgrad::check_cuda((call), #call)
