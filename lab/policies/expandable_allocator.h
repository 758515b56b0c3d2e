// The expandable policy: a caching variant whose segments grow in place (PyTorch's
// expandable_segments:True).
//
// Instead of obtaining a new segment for each cache miss, the policy reserves, per pool, one
// range of address space twice the device's capacity (MemorySource::reserve; nothing is
// committed) and maps pages into it as needed: 2 MiB pages for the small pool (requests up to
// 1 MiB), 20 MiB pages for the large pool. A request is rounded to 512 bytes and served by the
// smallest mapped free block that fits (best fit, split under the small-pool rule: any rest of
// 512 bytes or more stays free); when none fits, the lowest-addressed run of free and unmapped
// space that is long enough is mapped page by page, so the segment grows into the space after
// its last block instead of leaving a sliver in a segment of its own. A freed block merges with
// its free neighbours. empty_cache() (and an allocation that finds the device full) unmaps every
// whole page that holds no allocated byte, even in the middle of the segment. reserved_bytes and
// num_device_alloc/free follow mapped pages; each contiguous mapped range is one segment in
// snapshots and in the segment stat; inactive_split stats stay 0, as in PyTorch.
//
// The stitch policy is the same in 2 MiB pages for both pools, with one rule more (GMLake's
// idea, ASPLOS 2024): when a request must map pages, whole free pages elsewhere in the pool are
// unmapped first and their memory is mapped into the run the request needs, so one contiguous
// block is stitched from memory the pool already holds instead of growing it. On a GPU that is
// cuMemUnmap of a page and cuMemMap of the same physical handle at the new address (no
// cuMemCreate); a simulated device counts an unmap and a map, so reserved bytes stay where they
// were. Pages are taken from the highest addresses down, never from the run itself. It trades
// mapping calls for a lower peak.
//
// The source must support expansion (BoundedMemory and HostMemory do; CudaMemory does through
// cuMemAddressReserve/cuMemCreate/cuMemMap where the device supports virtual memory management).
#pragma once

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "allocator/config.h"
#include "allocator/policy_allocator.h"

namespace memgrad {

class ExpandableAllocator final : public PolicyAllocator {
 public:
  static constexpr size_t kSmallPage = 2 * kMiB;   // small-pool page, bytes (kSmallBuffer)
  static constexpr size_t kLargePage = 20 * kMiB;  // large-pool page, bytes (kLargeBuffer)

  // How pages are used: the expandable policy's (the default) or the stitch policy's (Stitch()).
  struct PageRules {
    size_t large_page = kLargePage;  // a multiple of kSmallPage
    bool stitch = false;             // move whole free pages into a run instead of growing
  };
  static PageRules Stitch() { return {kSmallPage, true}; }

  // Uses `config.memory_fraction`. Reserves nothing yet. Throws ConfigError naming the device
  // when `source` cannot reserve and map pages, or its page size does not divide 2 MiB.
  explicit ExpandableAllocator(MemorySource& source, const AllocatorConfig& config = {});
  ExpandableAllocator(MemorySource& source, const AllocatorConfig& config, PageRules rules);
  ~ExpandableAllocator() override;

  std::string_view policy_name() const override { return stitch_ ? "stitch" : "expandable"; }
  // Pages the stitch policy moved into a run a request needed instead of mapping new ones.
  size_t stitched_pages() const;
  // The page size of the small or the large pool.
  size_t page_size(bool small_pool) const { return small_pool ? small_.page : large_.page; }

 protected:
  // Allocates: nbytes rounded up to 512 (Block::nbytes); maps whole pages when the mapped free
  // blocks cannot serve it.
  Placement place(const Request& request) override;
  // Merges the block with its free neighbours (pages stay mapped until released).
  SplitTally take_back(const Block& block) override;
  // Unmaps every page with no allocated byte, in both pools; whether there was one. Allocated
  // memory is never touched.
  bool release_cached() override;
  // One segment per contiguous mapped range, tiled by its blocks (coalesced).
  void describe(std::vector<SegmentSnapshot>& out) const override;

 private:
  enum class State : uint8_t { Unmapped, Free, Allocated };
  struct Piece {
    size_t nbytes = 0;
    size_t requested = 0;  // allocated pieces only
    State state = State::Unmapped;
  };
  // One pool's growing segment: pieces tile the whole reserved range.
  struct Region {
    VirtualRegion range;
    size_t page = 0;
    StatPool pool = StatPool::SmallPool;
    std::map<size_t, Piece> pieces;                // offset -> piece
    std::set<std::pair<size_t, size_t>> free_set;  // (nbytes, offset) of mapped free pieces
    std::vector<bool> mapped;                      // per page
  };

  bool ensure_reserved(Region& r);
  bool find_block(Region& r, size_t size, size_t* offset, size_t* tried);
  bool lowest_run(const Region& r, size_t size, size_t* offset) const;
  bool map_range(Region& r, size_t offset, size_t size, size_t* tried);
  void map_pages(Region& r, size_t first, size_t count);
  void unmap_pages(Region& r, size_t first, size_t count);
  // The whole pages inside free blocks, as (first page, end page) runs in address order.
  static std::vector<std::pair<size_t, size_t>> whole_free_pages(const Region& r);
  size_t unmap_free_pages(Region& r);
  // Before the run [offset, offset + size) is mapped: unmaps as many whole free pages of `r`
  // outside it as the run has unmapped pages (or all there are), highest first.
  void stitch_pages(Region& r, size_t offset, size_t size);
  void split_at(Region& r, size_t offset);
  std::map<size_t, Piece>::iterator set_state(Region& r, size_t offset, size_t nbytes, State s);
  void erase_free(Region& r, std::map<size_t, Piece>::iterator it);
  void insert_free(Region& r, std::map<size_t, Piece>::iterator it);
  void snapshot_region(const Region& r, std::vector<SegmentSnapshot>& out) const;

  const bool stitch_;
  size_t stitched_pages_ = 0;
  Region small_;
  Region large_;
};

}  // namespace memgrad
