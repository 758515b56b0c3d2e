// CudaMemory: cudaMalloc / cudaFree under a guard that makes the source's device current.
#include "allocator/cuda_memory.h"

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "kernels/cuda/cuda_check.h"

namespace memgrad {

using kernels::cuda::check_cuda;
using kernels::cuda::DeviceGuard;

CudaMemory::CudaMemory(int device) : device_(device) {
  DeviceGuard guard(device_);
  size_t free = 0;
  check_cuda(cudaMemGetInfo(&free, &capacity_), "cudaMemGetInfo(&free, &total)", name());
}

void* CudaMemory::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  DeviceGuard guard(device_);
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, nbytes);
  if (status == cudaErrorMemoryAllocation) {
    // cudaMalloc leaves its error as the thread's last error: clear it so the next kernel
    // launch check does not report it.
    cudaGetLastError();
    return nullptr;
  }
  check_cuda(status, "cudaMalloc(&ptr, nbytes)", fmt::format("{}, {} bytes", name(), nbytes));
  return ptr;
}

void CudaMemory::free(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  DeviceGuard guard(device_);
  check_cuda(cudaFree(ptr), "cudaFree(ptr)", fmt::format("{}, {} bytes", name(), nbytes));
}

size_t CudaMemory::free_bytes() const {
  DeviceGuard guard(device_);
  size_t free = 0, total = 0;
  check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo(&free, &total)", name());
  return free;
}

std::string CudaMemory::name() const { return fmt::format("cuda:{}", device_); }

}  // namespace memgrad
