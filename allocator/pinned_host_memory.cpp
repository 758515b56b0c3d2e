// PinnedHostMemory: cudaHostAlloc / cudaFreeHost; capacity figures from the host.
#include "allocator/pinned_host_memory.h"

#include <unistd.h>

#include <cuda_runtime_api.h>

#include <cstdio>

#include <fmt/format.h>

#include "allocator/cuda_check.h"

namespace memgrad {
namespace {

// The device whose primary context pins the pages.
constexpr int kPinningDevice = 0;

}  // namespace

using detail::check_cuda;
using detail::DeviceGuard;

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

size_t PinnedHostMemory::capacity() const {
  return static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

size_t PinnedHostMemory::free_bytes() const {
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    while (std::fgets(line, sizeof line, f)) {
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    }
    std::fclose(f);
    if (kib > 0) return static_cast<size_t>(kib) * 1024;
  }
  return static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace memgrad
