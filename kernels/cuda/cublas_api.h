// cuBLAS, loaded when the first GEMM needs it.
//
// libcublas (and libcublasLt behind it, several hundred MB) is not linked into memgrad: every
// program of a CUDA build would map and relocate it at start, even one that never touches a
// GPU (about 150 MiB of RSS where a CPU build starts at a few MiB). The first cuBLAS call loads
// it with dlopen, as PyTorch loads its CUDA libraries when the first CUDA tensor is made, and
// looks up the few functions memgrad calls. The CUDA runtime is linked statically; it loads the
// driver itself on its first call.
#pragma once

#include <cublas_v2.h>

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

}  // namespace memgrad::kernels::cuda
