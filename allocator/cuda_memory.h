// One GPU's memory as a raw source: cudaMalloc / cudaFree on device `index`.
//
// The caching policy above asks for whole segments (2 MiB, 20 MiB, or a large request rounded
// to 2 MiB), so cudaMalloc, which synchronises the device, is called once per segment rather
// than once per tensor. Running out is answered with nullptr (after clearing the CUDA error
// that cudaMalloc leaves behind), so the policy can return its cache and retry; any other
// failure throws CudaError. Only in builds with the CUDA backend.
//
// Expansion (for the expandable policy) uses CUDA's virtual memory management, as PyTorch's
// expandable segments do: cuMemAddressReserve for the range, one cuMemCreate physical allocation
// per page mapped with cuMemMap and made accessible with cuMemSetAccess, cuMemUnmap and
// cuMemRelease to give a page back. The driver functions are looked up through the runtime
// (cudaGetDriverEntryPointByVersion), so nothing links libcuda and a CUDA build still starts on
// a machine without a driver. Supported when the device reports
// CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED and the functions are found.
#pragma once

#include <map>
#include <mutex>

#include "allocator/memory_source.h"

namespace memgrad {

class CudaMemory final : public MemorySource {
 public:
  // The memory of cuda:`device`. Reads the total capacity once (cudaMemGetInfo). Throws
  // CudaError when the device cannot be used.
  explicit CudaMemory(int device);
  ~CudaMemory() override;

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
  // Whether the device and driver support virtual memory management (read at construction).
  bool supports_expansion() const override { return vmm_page_ != 0; }
  // The driver's minimum allocation granularity for this device (2 MiB on current GPUs).
  size_t expansion_page_nbytes() const override;
  // cuMemAddressReserve. Allocates: address space only.
  VirtualRegion reserve(size_t nbytes) override;
  // One cuMemCreate + cuMemMap per page, then cuMemSetAccess (read/write from this device).
  // Allocates: nbytes of device memory. Returns false, mapping nothing, when the device is out
  // of memory.
  bool map(const VirtualRegion& region, size_t offset, size_t nbytes) override;
  // Waits for this device's queued work (cudaDeviceSynchronize with the device current), then
  // cuMemUnmap and cuMemRelease of each page's allocation.
  void unmap(const VirtualRegion& region, size_t offset, size_t nbytes) override;
  // cuMemAddressFree.
  void release(const VirtualRegion& region) override;

  int device() const { return device_; }

  static constexpr size_t kAlignment = 256;

 private:
  void unmap_pages(char* begin, size_t nbytes);

  int device_;
  size_t capacity_ = 0;
  size_t vmm_page_ = 0;  // 0: no virtual memory management
  std::mutex pages_mutex_;
  std::map<char*, unsigned long long> pages_;  // mapped page -> its CUmemGenericAllocationHandle
};

}  // namespace memgrad
