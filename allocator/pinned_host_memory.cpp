// PinnedHostMemory: cudaHostAlloc / cudaFreeHost; capacity figures from the host.
#include "allocator/pinned_host_memory.h"

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "allocator/cuda_check.h"
#include "allocator/host_memory.h"

namespace memgrad {
namespace {

// The device whose primary context pins the pages.
constexpr int kPinningDevice = 0;

}  // namespace

void* PinnedHostMemory::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  DeviceGuard guard(kPinningDevice);
  void* ptr = nullptr;
  const cudaError_t status = cudaHostAlloc(&ptr, nbytes, cudaHostAllocDefault);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the sticky last error, as for cudaMalloc
    return nullptr;
  }
  check_cuda(status, "cudaHostAlloc(&ptr, nbytes, cudaHostAllocDefault)",
             fmt::format("{} bytes", nbytes));
  return ptr;
}

void PinnedHostMemory::free(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  check_cuda(cudaFreeHost(ptr), "cudaFreeHost(ptr)", fmt::format("{} bytes", nbytes));
}

size_t PinnedHostMemory::capacity() const { return physical_host_bytes(); }

size_t PinnedHostMemory::free_bytes() const { return available_host_bytes(); }

}  // namespace memgrad
