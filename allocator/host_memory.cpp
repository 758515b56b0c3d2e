// Host memory source: aligned_alloc with page alignment; mmap/mprotect regions for expansion.
#include "allocator/host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace memgrad {
namespace {

size_t round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// A request larger than the machine is refused before the C library or the kernel sees it:
// what a 4 TiB malloc does (fail, overcommit, or abort under a sanitizer) differs between
// libraries, and mprotect would promise pages that could never be backed.
bool larger_than_machine(size_t nbytes) {
  static const size_t physical = physical_host_bytes();
  return nbytes > physical;
}

}  // namespace

void* HostMemory::allocate(size_t nbytes) {
  if (nbytes == 0 || larger_than_machine(nbytes)) return nullptr;
  // aligned_alloc needs a size that is a multiple of the alignment.
  void* ptr = std::aligned_alloc(kAlignment, round_up(nbytes, kAlignment));
  if (ptr != nullptr) in_use_.fetch_add(nbytes, std::memory_order_relaxed);
  return ptr;
}

void HostMemory::free(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  std::free(ptr);
  in_use_.fetch_sub(nbytes, std::memory_order_relaxed);
}

size_t physical_host_bytes() {
  return static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

size_t available_host_bytes() {
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    while (std::fgets(line, sizeof line, f)) {
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    }
    std::fclose(f);
    if (kib > 0) return static_cast<size_t>(kib) * 1024;
  }
  return static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) *
         static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

size_t HostMemory::capacity() const { return physical_host_bytes(); }

size_t HostMemory::free_bytes() const { return available_host_bytes(); }

size_t HostMemory::expansion_page_nbytes() const {
  return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

VirtualRegion HostMemory::reserve(size_t nbytes) {
  void* p = mmap(nullptr, nbytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return VirtualRegion{};
  return VirtualRegion{static_cast<char*>(p), nbytes};
}

bool HostMemory::map(const VirtualRegion& region, size_t offset, size_t nbytes) {
  if (larger_than_machine(nbytes)) return false;
  if (mprotect(region.base + offset, nbytes, PROT_READ | PROT_WRITE) != 0) return false;
  in_use_.fetch_add(nbytes, std::memory_order_relaxed);
  return true;
}

void HostMemory::unmap(const VirtualRegion& region, size_t offset, size_t nbytes) {
  madvise(region.base + offset, nbytes, MADV_DONTNEED);
  mprotect(region.base + offset, nbytes, PROT_NONE);
  in_use_.fetch_sub(nbytes, std::memory_order_relaxed);
}

void HostMemory::release(const VirtualRegion& region) {
  if (region.base != nullptr) munmap(region.base, region.nbytes);
}

}  // namespace memgrad
