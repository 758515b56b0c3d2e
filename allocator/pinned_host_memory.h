// Page-locked (pinned) host memory as a raw source: cudaHostAlloc / cudaFreeHost.
//
// Pinned pages can be read and written by the GPU's copy engines directly, which is what makes
// cudaMemcpyAsync from host memory truly asynchronous. Pinning is expensive and takes memory
// away from the rest of the system, so PinnedHostAllocator caches these blocks. Allocations are
// made with device 0 current (PyTorch pins in the primary context of the current device; with
// cudaHostAllocDefault the pages are usable from every device under unified addressing). Only
// in builds with the CUDA backend.
#pragma once

#include "allocator/memory_source.h"

namespace memgrad {

class PinnedHostMemory final : public MemorySource {
 public:
  PinnedHostMemory() = default;

  // Allocates: nbytes of page-locked host memory (cudaHostAlloc). Returns nullptr when the
  // system cannot pin that much; throws CudaError for other failures (no driver, no device).
  void* allocate(size_t nbytes) override;
  // cudaFreeHost.
  void free(void* ptr, size_t nbytes) override;

  // The machine's physical memory, in bytes.
  size_t capacity() const override;
  // The kernel's estimate of available memory (MemAvailable), in bytes.
  size_t free_bytes() const override;
  size_t alignment() const override { return kAlignment; }
  // "cpu (pinned)": the tensors are CPU tensors.
  std::string name() const override { return "cpu (pinned)"; }
  bool host_accessible() const override { return true; }

  static constexpr size_t kAlignment = 4096;
};

}  // namespace memgrad
