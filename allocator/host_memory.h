// Host memory as a raw source: page-aligned blocks from the C library.
//
// Freed ranges go straight back to the C library (and so, for large ones, to the kernel). The
// caching allocator above keeps its segments, so pages are faulted in once per segment rather
// than once per tensor.
//
// Expansion: reserve() maps address space with no access (mmap PROT_NONE, MAP_NORESERVE), map()
// makes pages of it readable and writable (the kernel backs them on first touch), unmap() gives
// the pages back (madvise MADV_DONTNEED) and makes them inaccessible again.
#pragma once

#include <atomic>

#include "allocator/memory_source.h"

namespace memgrad {

// The machine's physical memory, in bytes.
size_t physical_host_bytes();
// MemAvailable from /proc/meminfo (the kernel's estimate of what can be allocated without
// swapping), or the free physical pages when that is not readable.
size_t available_host_bytes();

class HostMemory final : public MemorySource {
 public:
  HostMemory() = default;

  // Allocates: nbytes of page-aligned host memory. Returns nullptr when the C library has none
  // or nbytes exceeds the machine's physical memory (never asked of the C library).
  void* allocate(size_t nbytes) override;
  void free(void* ptr, size_t nbytes) override;

  // The machine's physical memory, in bytes.
  size_t capacity() const override;
  // The kernel's estimate of available memory (MemAvailable), in bytes.
  size_t free_bytes() const override;
  size_t alignment() const override { return kAlignment; }
  std::string name() const override { return "cpu"; }
  bool host_accessible() const override { return true; }

  // Bytes currently handed out by this source (allocated ranges and mapped pages).
  size_t bytes_in_use() const { return in_use_.load(std::memory_order_relaxed); }

  bool supports_expansion() const override { return true; }
  // The kernel's page size (4 KiB on x86-64).
  size_t expansion_page_nbytes() const override;
  // Allocates: nothing (address space only). Empty region when mmap refuses.
  VirtualRegion reserve(size_t nbytes) override;
  // Allocates: nbytes (backed on first touch). False when the kernel refuses (mprotect ENOMEM).
  bool map(const VirtualRegion& region, size_t offset, size_t nbytes) override;
  void unmap(const VirtualRegion& region, size_t offset, size_t nbytes) override;
  void release(const VirtualRegion& region) override;

  static constexpr size_t kAlignment = 4096;

 private:
  std::atomic<size_t> in_use_{0};
};

}  // namespace memgrad
