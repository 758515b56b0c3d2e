// cuBLAS, loaded when the first GEMM needs it.
//
// libcublas (and libcublasLt behind it, several hundred MB) is not linked into memgrad: every
// program of a CUDA build would map and relocate it at start, even one that never touches a
// GPU (about 150 MiB of RSS where a CPU build starts at a few MiB). The first cuBLAS call loads
// it with dlopen, as PyTorch loads its CUDA libraries when the first CUDA tensor is made, and
// looks up the few functions memgrad calls. The CUDA runtime is linked statically; it loads the
// driver itself on its first call. A failing cuBLAS call throws CudaError (allocator/cuda_check.h)
// through check_cublas, with cuBLAS's own name and text for its status.
#pragma once

#include <cublas_v2.h>

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

struct CublasApi {
  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSetStream) set_stream = nullptr;
  decltype(&cublasSetWorkspace) set_workspace = nullptr;
  decltype(&cublasGemmEx_64) gemm_ex = nullptr;
  decltype(&cublasGemmStridedBatchedEx_64) gemm_strided_batched_ex = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// The loaded functions (loaded once, thread-safe). Throws CudaError naming the library and the
// loader's message when cuBLAS cannot be loaded or lacks a function.
const CublasApi& cublas_api();

// Whether cuBLAS has been loaded in this process (for tests and the startup benchmark).
bool cublas_loaded();

// Throws CudaError unless the cuBLAS status `status` is CUBLAS_STATUS_SUCCESS.
void check_cublas(int status, std::string_view call, std::string_view context = {},
                  std::source_location where = std::source_location::current());

}  // namespace memgrad::kernels::cuda

// Checks a cuBLAS call: MEMGRAD_CUBLAS_CHECK(cublasCreate(&handle)).
#define MEMGRAD_CUBLAS_CHECK(call) \
  ::memgrad::kernels::cuda::check_cublas(static_cast<int>(call), #call)
