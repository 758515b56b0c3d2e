// The fragmentation report: one pass over a snapshot's segments.
#include "allocator/fragmentation.h"

#include <algorithm>

#include <fmt/format.h>

#include "allocator/error.h"

namespace memgrad {

FragmentationReport fragmentation_of(const std::vector<SegmentSnapshot>& segments, StreamId stream,
                                     size_t source_budget,
                                     const std::function<size_t(size_t)>& segment_for) {
  FragmentationReport r;
  for (const SegmentSnapshot& seg : segments) {
    size_t live = 0, pending = 0, largest_free = 0;
    for (const BlockSnapshot& b : seg.blocks) {
      if (b.allocated) {
        live += b.nbytes;
        r.requested += b.requested;
      } else if (b.pending_free) {
        pending += b.nbytes;
      } else {
        largest_free = std::max(largest_free, b.nbytes);
      }
    }
    const size_t free = seg.nbytes - live - pending;
    r.reserved += seg.nbytes;
    r.allocated += live;
    r.stream += pending;
    if (seg.stream != stream) {
      r.stream += free;
    } else if (live > 0) {
      r.hard += free;
      r.largest_free_block = std::max(r.largest_free_block, largest_free);
    } else {
      r.soft += free;
      r.largest_free_block = std::max(r.largest_free_block, largest_free);
    }
  }
  r.rounding = r.allocated - r.requested;
  // From the source: the largest n whose segment fits what it can give once the allocator has
  // returned its free segments (what every policy does before it reports an OOM).
  const size_t budget = source_budget + r.soft;
  size_t lo = 0, hi = budget;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo + 1) / 2;
    if (segment_for(mid) <= budget) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  r.largest_request = std::max(r.largest_free_block, lo);
  return r;
}

std::string fragmentation_sentence(const FragmentationReport& r) {
  return fmt::format(
      "of the {} reserved but unallocated, {} is fenced by live blocks (hard "
      "fragmentation), {} lies in free segments (soft), {} belongs to other "
      "streams; the largest free block is {} and the largest request that would "
      "succeed now {}",
      format_size(r.reserved - r.allocated), format_size(r.hard), format_size(r.soft),
      format_size(r.stream), format_size(r.largest_free_block), format_size(r.largest_request));
}

}  // namespace memgrad
