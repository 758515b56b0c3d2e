// BoundedMemory: a reserved virtual range, an address-ordered free list, and a byte budget.
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
  // Twice the capacity plus slack: a first-fit layout can never run out of addresses before it
  // runs out of bytes in practice, so the capacity is the only limit users see.
  range_nbytes_ = round_up(2 * capacity + 64 * kMiB, 2 * kMiB);
  void* p = mmap(nullptr, range_nbytes_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    throw Error(fmt::format("{}: cannot reserve {} of address space for a simulated device",
                            name_, format_size(range_nbytes_)));
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
  for (auto it = free_ranges_.begin(); it != free_ranges_.end(); ++it) {
    if (it->second < rounded) continue;
    const size_t offset = it->first;
    const size_t remaining = it->second - rounded;
    free_ranges_.erase(it);
    if (remaining > 0) free_ranges_.emplace(offset + rounded, remaining);
    in_use_ += rounded;
    return base_ + offset;
  }
  return nullptr;
}

void BoundedMemory::free(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  const size_t rounded = round_up(nbytes, kGranularity);
  const size_t offset = static_cast<size_t>(static_cast<char*>(ptr) - base_);
  internal_check(offset + rounded <= range_nbytes_, "BoundedMemory::free of a foreign pointer");
  std::lock_guard<std::mutex> lock(mutex_);
  size_t start = offset;
  size_t end = offset + rounded;
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
  in_use_ -= rounded;
  // Give back the pages that are now entirely free (a page shared with a live neighbour stays).
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t lo = std::max(round_down(offset, page), round_up(start, page));
  const size_t hi = std::min(round_up(offset + rounded, page), round_down(end, page));
  if (hi > lo) madvise(base_ + lo, hi - lo, MADV_DONTNEED);
}

size_t BoundedMemory::free_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capacity_ - in_use_;
}

size_t BoundedMemory::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_use_;
}

}  // namespace memgrad
