// One GPU's memory as a raw source: cudaMalloc / cudaFree on device `index`.
//
// The caching policy above asks for whole segments (2 MiB, 20 MiB, or a large request rounded
// to 2 MiB), so cudaMalloc, which synchronises the device, is called once per segment rather
// than once per tensor. Running out is answered with nullptr (after clearing the CUDA error
// that cudaMalloc leaves behind), so the policy can return its cache and retry; any other
// failure throws CudaError. Only in builds with the CUDA backend.
#pragma once

#include "allocator/memory_source.h"

namespace memgrad {

class CudaMemory final : public MemorySource {
 public:
  // The memory of cuda:`device`. Reads the total capacity once (cudaMemGetInfo). Throws
  // CudaError when the device cannot be used.
  explicit CudaMemory(int device);

  // Allocates: nbytes of device memory (cudaMalloc, 256-byte aligned) on this device, whatever
  // the calling thread's current device. Returns nullptr when the device is out of memory.
  void* allocate(size_t nbytes) override;
  // cudaFree (which waits for the device's queued work first).
  void free(void* ptr, size_t nbytes) override;

  // The device's total memory, as cudaMemGetInfo reports it.
  size_t capacity() const override { return capacity_; }
  // What cudaMemGetInfo reports as free now (other processes and the CUDA context included).
  size_t free_bytes() const override;
  size_t alignment() const override { return kAlignment; }
  // "cuda:N".
  std::string name() const override;
  bool host_accessible() const override { return false; }
  // No expansion yet: cuMemAddressReserve / cuMemCreate / cuMemMap are not wired, so the
  // expandable policy refuses a CUDA device (ConfigError) until they are.
  bool supports_expansion() const override { return false; }

  int device() const { return device_; }

  static constexpr size_t kAlignment = 256;

 private:
  int device_;
  size_t capacity_ = 0;
};

}  // namespace memgrad
