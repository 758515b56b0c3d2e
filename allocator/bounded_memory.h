// A simulated device with a fixed capacity and its own address range.
//
// BoundedMemory makes out-of-memory and fragmentation reproducible on any machine: it refuses a
// request once the bytes it has handed out would exceed `capacity`, exactly like a GPU of that
// size. Its memory is real (CPU kernels compute in it): one virtual range is reserved up front
// without backing pages, ranges are handed out first-fit by address inside it, and pages are
// given back to the kernel when a range is freed. The range is larger than the capacity, so (as
// with a real driver's virtual memory) only the byte count limits what fits, never the layout.
// Addresses are deterministic relative to `base()`, which is what examples print.
//
// It supports expansion: reserve() takes an address range from the top of the same reserved
// range (aligned to 2 MiB, inaccessible until mapped), map() commits pages of it (counted against
// the capacity, made readable and writable) and unmap() gives them back to the kernel and makes
// them inaccessible again, so a touch of an unmapped page faults, as on a GPU.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "allocator/memory_source.h"

namespace memgrad {

class BoundedMemory final : public MemorySource {
 public:
  // The largest capacity: the device reserves 6x its capacity in address space (x86-64 gives a
  // process 128 TiB), so 4 TiB, far above any GPU's memory.
  static constexpr size_t kMaxCapacity = size_t{4} << 40;

  // A device called `name` (e.g. "sim:0") that can hand out at most `capacity` bytes. Throws
  // ConfigError for a capacity of 0 or above kMaxCapacity, and Error when the address range
  // cannot be reserved.
  BoundedMemory(size_t capacity, std::string name);
  ~BoundedMemory() override;

  // Allocates: nbytes rounded up to kGranularity, first fit by address; nullptr when the bytes
  // in use would exceed the capacity.
  void* allocate(size_t nbytes) override;
  void free(void* ptr, size_t nbytes) override;

  size_t capacity() const override { return capacity_; }
  size_t free_bytes() const override;
  size_t alignment() const override { return kGranularity; }
  std::string name() const override { return name_; }
  bool host_accessible() const override { return true; }
  // Follows a recorded layout: the k-th allocate() of expected[k].second bytes (rounded) is
  // placed at offset expected[k].first when that range is free, so segments keep the order by
  // address they had where recorded (a caching allocator breaks ties between equal free blocks
  // by address). The first request that differs in size, or whose place is taken or outside the
  // range, ends the list: first fit from then on.
  void follow_placements(std::vector<std::pair<size_t, size_t>> expected);

  // Start of the reserved range; `ptr - address_base()` is a deterministic device address.
  uintptr_t address_base() const override { return reinterpret_cast<uintptr_t>(base_); }

  // Bytes handed out right now: allocate()d ranges (rounded to kGranularity) plus mapped pages.
  size_t bytes_in_use() const;

  bool supports_expansion() const override { return true; }
  // The kernel's page size (4 KiB on x86-64).
  size_t expansion_page_nbytes() const override;
  // Allocates: nothing (address space only). Empty region when the range has no room left.
  VirtualRegion reserve(size_t nbytes) override;
  // Allocates: nbytes of the capacity. False when in-use bytes would exceed the capacity.
  bool map(const VirtualRegion& region, size_t offset, size_t nbytes) override;
  void unmap(const VirtualRegion& region, size_t offset, size_t nbytes) override;
  void release(const VirtualRegion& region) override;

  static constexpr size_t kGranularity = 512;
  static constexpr size_t kRegionAlignment = 2 * 1024 * 1024;  // reserve() alignment, bytes

 private:
  std::string name_;
  size_t capacity_;
  size_t range_nbytes_;  // size of the reserved virtual range (> capacity)
  char* base_ = nullptr;

  mutable std::mutex mutex_;
  size_t in_use_ = 0;                                // guarded by mutex_
  std::map<size_t, size_t> free_ranges_;             // offset -> nbytes, address-ordered, coalesced
  std::map<size_t, size_t> regions_;                 // reserved regions: offset -> nbytes
  std::map<size_t, size_t> region_mapped_;           // reserved regions: offset -> mapped bytes
  std::vector<std::pair<size_t, size_t>> expected_;  // follow_placements(): offset, bytes
  size_t next_expected_ = 0;

  // Requires mutex_. Takes [offset, offset + nbytes) out of the free ranges; false when it is
  // not wholly free.
  bool take_range(size_t offset, size_t nbytes);

  // Requires mutex_. The region starting at `region.base`; throws InternalError when unknown.
  std::map<size_t, size_t>::iterator find_region(const VirtualRegion& region, size_t offset,
                                                 size_t nbytes);
  // Requires mutex_. Returns [start, start + nbytes) to the free list, merging neighbours.
  std::pair<size_t, size_t> insert_free(size_t start, size_t nbytes);
};

}  // namespace memgrad
