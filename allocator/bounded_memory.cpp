// BoundedMemory: a reserved virtual range, an address-ordered free list, and a byte budget.
// Expansion regions are carved from the top of the same range, so their addresses are as
// deterministic as everything else's.
#include "allocator/bounded_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "allocator/error.h"

namespace memgrad {
namespace {

constexpr size_t kMiB = 1024 * 1024;

size_t round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }
size_t round_down(size_t n, size_t multiple) { return n / multiple * multiple; }

}  // namespace

BoundedMemory::BoundedMemory(size_t capacity, std::string name)
    : name_(std::move(name)), capacity_(capacity) {
  if (capacity == 0) throw ConfigError(fmt::format("{}: capacity must be > 0 bytes", name_));
  if (capacity > kMaxCapacity) {
    throw ConfigError(
        fmt::format("{}: a capacity of {} bytes is more than a simulated device can "
                    "have (at most {}: it reserves 6x its capacity in addresses)",
                    name_, capacity, format_size(kMaxCapacity)));
  }
  // Twice the capacity plus slack: a first-fit layout can never run out of addresses before it
  // runs out of bytes in practice, so the capacity is the only limit users see. Four times more
  // for expansion regions (the expandable policy reserves one per pool of twice the capacity).
  // Address space only: nothing is committed until it is handed out or mapped.
  range_nbytes_ = round_up(6 * capacity + 64 * kMiB, kRegionAlignment);
  void* p = mmap(nullptr, range_nbytes_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    throw Error(fmt::format("{}: cannot reserve {} of address space for a simulated device", name_,
                            format_size(range_nbytes_)));
  }
  base_ = static_cast<char*>(p);
  free_ranges_.emplace(0, range_nbytes_);
}

BoundedMemory::~BoundedMemory() {
  if (base_ != nullptr) munmap(base_, range_nbytes_);
}

void* BoundedMemory::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const size_t rounded = round_up(nbytes, kGranularity);
  std::lock_guard<std::mutex> lock(mutex_);
  if (in_use_ + rounded > capacity_) return nullptr;
  if (next_expected_ < expected_.size()) {
    const auto [offset, expected] = expected_[next_expected_];
    if (expected == rounded && take_range(offset, rounded)) {
      ++next_expected_;
      in_use_ += rounded;
      return base_ + offset;
    }
    expected_.clear();  // the layout is no longer the recorded one
  }
  for (const auto& [offset, nbytes] : free_ranges_) {
    if (nbytes < rounded) continue;
    const size_t at = offset;  // take_range erases the entry `offset` refers to
    internal_check(take_range(at, rounded), "BoundedMemory: a free range could not be taken");
    in_use_ += rounded;
    return base_ + at;
  }
  return nullptr;
}

void BoundedMemory::follow_placements(std::vector<std::pair<size_t, size_t>> expected) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [offset, nbytes] : expected) nbytes = round_up(nbytes, kGranularity);
  expected_ = std::move(expected);
  next_expected_ = 0;
}

bool BoundedMemory::take_range(size_t offset, size_t nbytes) {
  if (offset % kGranularity != 0 || offset > range_nbytes_ || nbytes > range_nbytes_ - offset) {
    return false;
  }
  auto it = free_ranges_.upper_bound(offset);
  if (it == free_ranges_.begin()) return false;
  --it;
  const size_t start = it->first, end = it->first + it->second;
  if (offset + nbytes > end) return false;
  free_ranges_.erase(it);
  if (offset > start) free_ranges_.emplace(start, offset - start);
  if (offset + nbytes < end) free_ranges_.emplace(offset + nbytes, end - offset - nbytes);
  return true;
}

void BoundedMemory::free(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  const size_t rounded = round_up(nbytes, kGranularity);
  const size_t offset = static_cast<size_t>(static_cast<char*>(ptr) - base_);
  internal_check(offset + rounded <= range_nbytes_, "BoundedMemory::free of a foreign pointer");
  std::lock_guard<std::mutex> lock(mutex_);
  const auto [start, end] = insert_free(offset, rounded);
  in_use_ -= rounded;
  // Give back the pages that are now entirely free (a page shared with a live neighbour stays).
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t lo = std::max(round_down(offset, page), round_up(start, page));
  const size_t hi = std::min(round_up(offset + rounded, page), round_down(end, page));
  if (hi > lo) madvise(base_ + lo, hi - lo, MADV_DONTNEED);
}

std::pair<size_t, size_t> BoundedMemory::insert_free(size_t offset, size_t nbytes) {
  size_t start = offset;
  size_t end = offset + nbytes;
  // Merge with the free neighbours on both sides so the list stays coalesced.
  auto next = free_ranges_.lower_bound(offset);
  if (next != free_ranges_.end() && next->first == end) {
    end += next->second;
    next = free_ranges_.erase(next);
  }
  if (next != free_ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      free_ranges_.erase(prev);
    }
  }
  free_ranges_.emplace(start, end - start);
  return {start, end};
}

size_t BoundedMemory::free_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capacity_ - in_use_;
}

size_t BoundedMemory::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_use_;
}

// ---- expansion ----

size_t BoundedMemory::expansion_page_nbytes() const {
  return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

VirtualRegion BoundedMemory::reserve(size_t nbytes) {
  internal_check(nbytes > 0 && nbytes % expansion_page_nbytes() == 0,
                 "BoundedMemory::reserve of a size that is not a page multiple");
  std::lock_guard<std::mutex> lock(mutex_);
  // The highest free range that holds an aligned region: plain allocations fill the range from
  // the bottom, regions from the top.
  for (auto it = free_ranges_.rbegin(); it != free_ranges_.rend(); ++it) {
    const size_t range_end = it->first + it->second;
    if (it->second < nbytes) continue;
    const size_t start = round_down(range_end - nbytes, kRegionAlignment);
    if (start < it->first) continue;
    const size_t range_start = it->first;
    free_ranges_.erase(std::next(it).base());
    if (start > range_start) free_ranges_.emplace(range_start, start - range_start);
    if (range_end > start + nbytes)
      free_ranges_.emplace(start + nbytes, range_end - start - nbytes);
    regions_.emplace(start, nbytes);
    region_mapped_.emplace(start, 0);
    // Unmapped pages are inaccessible, so a stray access faults instead of reading nothing.
    mprotect(base_ + start, nbytes, PROT_NONE);
    return VirtualRegion{base_ + start, nbytes};
  }
  return VirtualRegion{};
}

std::map<size_t, size_t>::iterator BoundedMemory::find_region(const VirtualRegion& region,
                                                              size_t offset, size_t nbytes) {
  const size_t page = expansion_page_nbytes();
  internal_check(region.base >= base_ && region.base < base_ + range_nbytes_,
                 "BoundedMemory: a region of another source");
  auto it = regions_.find(static_cast<size_t>(region.base - base_));
  internal_check(it != regions_.end(), "BoundedMemory: an unknown region");
  internal_check(offset % page == 0 && nbytes % page == 0 && offset + nbytes <= it->second,
                 "BoundedMemory: map/unmap outside the region or not page-aligned");
  return it;
}

bool BoundedMemory::map(const VirtualRegion& region, size_t offset, size_t nbytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = find_region(region, offset, nbytes);
  if (in_use_ + nbytes > capacity_) return false;
  if (mprotect(region.base + offset, nbytes, PROT_READ | PROT_WRITE) != 0) return false;
  in_use_ += nbytes;
  region_mapped_[it->first] += nbytes;
  return true;
}

void BoundedMemory::unmap(const VirtualRegion& region, size_t offset, size_t nbytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = find_region(region, offset, nbytes);
  size_t& mapped = region_mapped_[it->first];
  internal_check(mapped >= nbytes, "BoundedMemory::unmap of more than is mapped");
  madvise(region.base + offset, nbytes, MADV_DONTNEED);
  mprotect(region.base + offset, nbytes, PROT_NONE);
  mapped -= nbytes;
  in_use_ -= nbytes;
}

void BoundedMemory::release(const VirtualRegion& region) {
  if (region.base == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = find_region(region, 0, 0);
  internal_check(region_mapped_[it->first] == 0, "BoundedMemory::release of a mapped region");
  const size_t start = it->first;
  const size_t nbytes = it->second;
  mprotect(base_ + start, nbytes, PROT_READ | PROT_WRITE);
  regions_.erase(it);
  region_mapped_.erase(start);
  insert_free(start, nbytes);
}

}  // namespace memgrad
