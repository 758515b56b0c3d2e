// The raw-memory source interface: where an allocator's bytes come from.
//
// A source hands out large raw ranges (the caching policy asks it for whole segments) and takes
// them back. It knows its capacity and how much of it is still free. Running out is a normal
// answer (nullptr), not an exception, because the allocator above may release its cache and ask
// again; anything else that goes wrong throws.
//
// A source may also support expansion (the expandable policy needs it): a virtual region is
// reserved once, without memory behind it, and pages are mapped into it and unmapped again, so
// one segment grows and shrinks in place. Only mapped bytes count against the capacity.
// BoundedMemory and HostMemory support it with reserved address space and madvise, CudaMemory
// with CUDA's virtual memory management where the device has it; sources without it keep the
// defaults, which report no support and throw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace memgrad {

// A range of reserved address space (MemorySource::reserve). Empty (base == nullptr) when none.
struct VirtualRegion {
  char* base = nullptr;
  size_t nbytes = 0;
};

class MemorySource {
 public:
  MemorySource() = default;
  MemorySource(const MemorySource&) = delete;
  MemorySource& operator=(const MemorySource&) = delete;
  virtual ~MemorySource() = default;

  // Returns `nbytes` of raw memory aligned to at least `alignment()`, or nullptr when the source
  // has no room left. Throws memgrad::Error for other failures.
  virtual void* allocate(size_t nbytes) = 0;

  // Returns a range obtained from allocate(); `nbytes` must be the size that was asked for.
  virtual void free(void* ptr, size_t nbytes) = 0;

  // Total bytes the source can hand out (a GPU's memory, a simulated capacity, host RAM).
  virtual size_t capacity() const = 0;

  // Bytes not handed out by anyone right now (for a real device: what the driver reports).
  virtual size_t free_bytes() const = 0;

  // Alignment of every returned pointer, in bytes.
  virtual size_t alignment() const = 0;

  // The device this source serves, in the form users write it: "cpu", "sim:0", "cuda:0".
  virtual std::string name() const = 0;

  // Whether the bytes are host-addressable, so CPU kernels may read and write them.
  virtual bool host_accessible() const = 0;

  // Subtracted from pointers when addresses are shown (traces, snapshots). Simulated devices
  // return the start of their range so their addresses are the same on every run.
  virtual uintptr_t address_base() const { return 0; }

  // ---- expansion (optional) ----

  // Whether reserve/map/unmap/release work. Default: no.
  virtual bool supports_expansion() const { return false; }

  // The page size of map/unmap, in bytes: offsets and sizes passed to them are multiples of it.
  virtual size_t expansion_page_nbytes() const;

  // Reserves `nbytes` (a multiple of the page size) of address space with no memory behind it.
  // Allocates: nothing counted against the capacity. Returns an empty region when no address
  // space is left. Throws Error when the source does not support expansion.
  virtual VirtualRegion reserve(size_t nbytes);

  // Maps memory into [offset, offset + nbytes) of `region` (page multiples, currently unmapped).
  // Allocates: nbytes, counted against the capacity. Returns false (mapping nothing) when the
  // capacity would be exceeded.
  virtual bool map(const VirtualRegion& region, size_t offset, size_t nbytes);

  // Unmaps [offset, offset + nbytes) of `region` (page multiples, currently mapped) and gives the
  // memory back: the capacity counts nbytes less.
  virtual void unmap(const VirtualRegion& region, size_t offset, size_t nbytes);

  // Gives the address space of `region` back. Every page must be unmapped first.
  virtual void release(const VirtualRegion& region);
};

}  // namespace memgrad
