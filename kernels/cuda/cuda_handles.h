// The CUDA-typed side of device_context.h, for the backend's own files (.cu and gemm.cpp):
// stream handles behind StreamIds, the cuBLAS handle of a device bound to the current stream
// and its workspace, and the per-device word that index kernels report bad indices through.
// Includes CUDA headers: never include it from the engine.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>

#include "allocator/stream.h"
#include "kernels/backend.h"
#include "kernels/cuda/device_context.h"

namespace memgrad::kernels::cuda {

// The handle of `stream` on `device` (nullptr, the legacy default stream, for kDefaultStream).
// Throws CudaError for an id that is not one of `device`'s streams.
cudaStream_t stream_handle(int device, StreamId stream);

// The handle of the calling thread's current stream on `device`.
cudaStream_t current_cuda_stream(int device);

// The cuBLAS handle of a device for the duration of one call: the device's handle mutex is held,
// the handle runs on the calling thread's current stream, and its workspace is that stream's
// (taken from the workspace allocator on first use). Construct it with the device current.
class BlasSession {
 public:
  explicit BlasSession(int device);
  cublasHandle_t handle() const { return handle_; }

 private:
  std::unique_lock<std::mutex> lock_;
  cublasHandle_t handle_ = nullptr;
};

// The device word index kernels lower (atomicMin) to the first bad position, held for one
// check: reset it, launch the check, read it back, all under `lock`.
struct IndexCheckWord {
  std::unique_lock<std::mutex> lock;
  unsigned long long* word = nullptr;  // device memory
};
IndexCheckWord index_check_word(int device);

// The first value of the int64 `index` outside [0, limit) (other than *ignore when given), by
// row-major position, or ok. Waits for the device's current stream (index.cu).
IndexCheck check_index_range(int device, const Operand& index, int64_t limit,
                             const int64_t* ignore = nullptr);

}  // namespace memgrad::kernels::cuda
