// Host memory source: aligned_alloc with page alignment.
#include "allocator/host_memory.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace memgrad {
namespace {

size_t round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// MemAvailable from /proc/meminfo, or free physical pages when that is not readable.
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
  return static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

void* HostMemory::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
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

size_t HostMemory::capacity() const {
  return static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

size_t HostMemory::free_bytes() const { return available_host_bytes(); }

}  // namespace memgrad
