// ExpandableAllocator: per pool, one reserved range whose pieces are unmapped, free or allocated.
//
// Every byte of a region belongs to exactly one piece; neighbouring pieces that are both free or
// both unmapped are merged, so the free pieces are exactly the mapped free blocks and the
// unmapped pieces are whole pages. Mapping turns unmapped pages into free space, unmapping turns
// whole free pages back; allocation and free move between free and allocated.
#include "lab/policies/expandable_allocator.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "allocator/error.h"
#include "allocator/sizes.h"

namespace memgrad {

ExpandableAllocator::ExpandableAllocator(MemorySource& source, const AllocatorConfig& config)
    : ExpandableAllocator(source, config, PageRules{}) {}

ExpandableAllocator::ExpandableAllocator(MemorySource& source, const AllocatorConfig& config,
                                         PageRules rules)
    : PolicyAllocator(source, config.memory_fraction), stitch_(rules.stitch) {
  if (!source.supports_expansion()) {
    throw ConfigError(
        fmt::format("policy:{}: device {} cannot reserve and map pages (its memory source has "
                    "no expansion support), so segments cannot grow there; use policy:caching",
                    policy_name(), source.name()),
        "policy", std::string(policy_name()));
  }
  const size_t source_page = source.expansion_page_nbytes();
  if (rules.large_page == 0 || rules.large_page % kSmallPage != 0) {
    throw ConfigError(fmt::format("policy:{}: large-pool pages of {} bytes are not a multiple of "
                                  "the {}-byte small-pool page",
                                  policy_name(), rules.large_page, kSmallPage),
                      "policy", std::string(policy_name()));
  }
  if (source_page == 0 || kSmallPage % source_page != 0) {
    throw ConfigError(fmt::format("policy:{}: device {} maps pages of {} bytes, which do not "
                                  "divide the policy's {}-byte pages",
                                  policy_name(), source.name(), source_page, kSmallPage),
                      "policy", std::string(policy_name()));
  }
  small_.page = kSmallPage;
  small_.pool = StatPool::SmallPool;
  large_.page = rules.large_page;
  large_.pool = StatPool::LargePool;
}

ExpandableAllocator::~ExpandableAllocator() {
  for (Region* r : {&small_, &large_}) {
    if (r->range.base == nullptr) continue;
    for (size_t p = 0; p < r->mapped.size(); ++p) {
      if (r->mapped[p]) source_.unmap(r->range, p * r->page, r->page);
    }
    source_.release(r->range);
  }
}

// ---- pieces ----

void ExpandableAllocator::erase_free(Region& r, std::map<size_t, Piece>::iterator it) {
  if (it->second.state == State::Free) r.free_set.erase({it->second.nbytes, it->first});
}

void ExpandableAllocator::insert_free(Region& r, std::map<size_t, Piece>::iterator it) {
  if (it->second.state == State::Free) r.free_set.emplace(it->second.nbytes, it->first);
}

void ExpandableAllocator::split_at(Region& r, size_t offset) {
  if (offset >= r.range.nbytes || r.pieces.count(offset) != 0) return;
  auto it = std::prev(r.pieces.upper_bound(offset));
  internal_check(it->second.state != State::Allocated, "expandable: splitting an allocated block");
  erase_free(r, it);
  const size_t left = offset - it->first;
  Piece right = it->second;
  right.nbytes -= left;
  it->second.nbytes = left;
  insert_free(r, it);
  insert_free(r, r.pieces.emplace(offset, right).first);
}

std::map<size_t, ExpandableAllocator::Piece>::iterator ExpandableAllocator::set_state(Region& r,
                                                                                      size_t offset,
                                                                                      size_t nbytes,
                                                                                      State s) {
  split_at(r, offset);
  split_at(r, offset + nbytes);
  auto first = r.pieces.find(offset);
  // Fold every piece of the range into the first one.
  for (auto it = first; it != r.pieces.end() && it->first < offset + nbytes;) {
    erase_free(r, it);
    it = it == first ? std::next(it) : r.pieces.erase(it);
  }
  first->second = Piece{nbytes, 0, s};
  if (s != State::Allocated) {
    // Merge with neighbours in the same state: free with free, unmapped with unmapped.
    auto next = std::next(first);
    if (next != r.pieces.end() && next->second.state == s) {
      erase_free(r, next);
      first->second.nbytes += next->second.nbytes;
      r.pieces.erase(next);
    }
    if (first != r.pieces.begin()) {
      auto prev = std::prev(first);
      if (prev->second.state == s) {
        erase_free(r, prev);
        prev->second.nbytes += first->second.nbytes;
        r.pieces.erase(first);
        first = prev;
      }
    }
  }
  insert_free(r, first);
  return first;
}

// ---- pages ----

bool ExpandableAllocator::ensure_reserved(Region& r) {
  if (r.range.base != nullptr) return true;
  // Twice the capacity, so a run long enough for any request that fits the device exists
  // after the highest allocated block (PyTorch reserves 1 1/8 x the GPU's memory).
  const size_t nbytes = round_up(2 * source_.capacity(), r.page);
  r.range = source_.reserve(nbytes);
  if (r.range.base == nullptr) return false;
  r.pieces.emplace(0, Piece{nbytes, 0, State::Unmapped});
  r.mapped.assign(nbytes / r.page, false);
  return true;
}

void ExpandableAllocator::map_pages(Region& r, size_t first, size_t count) {
  const bool left = first > 0 && r.mapped[first - 1];
  const bool right = first + count < r.mapped.size() && r.mapped[first + count];
  std::fill_n(r.mapped.begin() + static_cast<std::ptrdiff_t>(first), count, true);
  set_state(r, first * r.page, count * r.page, State::Free);
  // A new run of mapped pages is a new segment; one that touches a run extends it. One source
  // call per page.
  count_mapping(r.pool, r.range.base + first * r.page, count * r.page, count,
                1 - int{left} - int{right}, true);
}

void ExpandableAllocator::unmap_pages(Region& r, size_t first, size_t count) {
  source_.unmap(r.range, first * r.page, count * r.page);
  std::fill_n(r.mapped.begin() + static_cast<std::ptrdiff_t>(first), count, false);
  const bool left = first > 0 && r.mapped[first - 1];
  const bool right = first + count < r.mapped.size() && r.mapped[first + count];
  set_state(r, first * r.page, count * r.page, State::Unmapped);
  count_mapping(r.pool, r.range.base + first * r.page, count * r.page, count,
                int{left} + int{right} - 1, false);
}

bool ExpandableAllocator::map_range(Region& r, size_t offset, size_t size, size_t* tried) {
  // The unmapped pages under [offset, offset + size), as runs of consecutive pages.
  std::vector<std::pair<size_t, size_t>> runs;  // (first page, count)
  for (size_t p = offset / r.page; p <= (offset + size - 1) / r.page; ++p) {
    if (r.mapped[p]) continue;
    if (!runs.empty() && runs.back().first + runs.back().second == p) {
      ++runs.back().second;
    } else {
      runs.emplace_back(p, 1);
    }
  }
  size_t total = 0;
  for (const auto& [first, count] : runs) total += count * r.page;
  *tried = total;
  if (!within_fraction(total)) return false;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (source_.map(r.range, runs[i].first * r.page, runs[i].second * r.page)) continue;
    for (size_t j = 0; j < i; ++j)
      source_.unmap(r.range, runs[j].first * r.page, runs[j].second * r.page);
    return false;
  }
  for (const auto& [first, count] : runs) map_pages(r, first, count);
  return true;
}

std::vector<std::pair<size_t, size_t>> ExpandableAllocator::whole_free_pages(const Region& r) {
  std::vector<std::pair<size_t, size_t>> runs;
  for (const auto& [offset, piece] : r.pieces) {
    if (piece.state != State::Free) continue;
    const size_t first = (offset + r.page - 1) / r.page;
    const size_t end = (offset + piece.nbytes) / r.page;
    if (first < end) runs.emplace_back(first, end);  // else no whole page inside this block
  }
  return runs;
}

size_t ExpandableAllocator::unmap_free_pages(Region& r) {
  size_t released = 0;
  for (const auto& [first, end] : whole_free_pages(r)) {
    unmap_pages(r, first, end - first);
    released += (end - first) * r.page;
  }
  return released;
}

// ---- allocate / free ----

bool ExpandableAllocator::lowest_run(const Region& r, size_t size, size_t* offset) const {
  size_t run_start = 0;
  size_t run_nbytes = 0;
  for (const auto& [at, piece] : r.pieces) {
    if (piece.state == State::Allocated) {
      run_nbytes = 0;
      continue;
    }
    if (run_nbytes == 0) run_start = at;
    run_nbytes += piece.nbytes;
    if (run_nbytes >= size) {
      *offset = run_start;
      return true;
    }
  }
  return false;
}

void ExpandableAllocator::stitch_pages(Region& r, size_t offset, size_t size) {
  const size_t run_first = offset / r.page;
  const size_t run_end = (offset + size - 1) / r.page + 1;
  size_t count = 0;  // the run's unmapped pages: what map_range would map anew
  for (size_t p = run_first; p < run_end; ++p) count += r.mapped[p] ? 0 : 1;
  const std::vector<std::pair<size_t, size_t>> whole = whole_free_pages(r);
  for (auto it = whole.rbegin(); it != whole.rend() && count > 0; ++it) {
    for (size_t p = it->second; p-- > it->first && count > 0;) {
      if (p >= run_first && p < run_end) continue;
      unmap_pages(r, p, 1);
      ++stitched_pages_;
      --count;
    }
  }
}

size_t ExpandableAllocator::stitched_pages() const {
  const auto guard = lock();
  return stitched_pages_;
}

bool ExpandableAllocator::find_block(Region& r, size_t size, size_t* offset, size_t* tried) {
  auto best = r.free_set.lower_bound({size, 0});
  if (best != r.free_set.end()) {
    *offset = best->second;
    return true;
  }
  if (!lowest_run(r, size, offset)) {
    *tried = round_up(size, r.page);
    return false;
  }
  if (stitch_) stitch_pages(r, *offset, size);
  return map_range(r, *offset, size, tried);
}

Placement ExpandableAllocator::place(const Request& request) {
  const size_t size = round_up(request.nbytes, kMinBlockSize);
  Region& r = size <= kSmallSize ? small_ : large_;
  if (!ensure_reserved(r)) return Placement::refused(size);
  size_t offset = 0;
  size_t tried = 0;
  if (!find_block(r, size, &offset, &tried)) return Placement::refused(tried);
  auto it = set_state(r, offset, size, State::Allocated);
  it->second.requested = request.nbytes;
  return Placement{r.range.base + offset, size, r.pool, &r};
}

SplitTally ExpandableAllocator::take_back(const Block& block) {
  auto& r = *static_cast<Region*>(block.record);
  const auto offset = static_cast<size_t>(static_cast<char*>(block.ptr) - r.range.base);
  auto it = r.pieces.find(offset);
  internal_check(it != r.pieces.end() && it->second.state == State::Allocated,
                 "expandable: free of a block that is not allocated (double free?)");
  set_state(r, offset, it->second.nbytes, State::Free);
  return {};  // expandable segments keep inactive_split at 0, as PyTorch's
}

bool ExpandableAllocator::release_cached() {
  // Whole free pages of both pools go back to the device.
  const size_t released = unmap_free_pages(small_) + unmap_free_pages(large_);
  return released > 0;
}

// ---- snapshot ----

void ExpandableAllocator::snapshot_region(const Region& r,
                                          std::vector<SegmentSnapshot>& out) const {
  const uintptr_t base = reinterpret_cast<uintptr_t>(r.range.base) - source_.address_base();
  bool open = false;
  for (const auto& [offset, piece] : r.pieces) {
    if (piece.state == State::Unmapped) {
      open = false;
      continue;
    }
    if (!open) {
      SegmentSnapshot s;
      s.address = base + offset;
      s.small_pool = r.pool == StatPool::SmallPool;
      s.expandable = true;
      out.push_back(std::move(s));
      open = true;
    }
    out.back().nbytes += piece.nbytes;
    out.back().blocks.push_back(
        {base + offset, piece.nbytes, piece.requested, piece.state == State::Allocated, false});
  }
}

void ExpandableAllocator::describe(std::vector<SegmentSnapshot>& out) const {
  for (const Region* r : {&small_, &large_}) {
    if (r->range.base != nullptr) snapshot_region(*r, out);
  }
}

}  // namespace memgrad
