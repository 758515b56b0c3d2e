// The first-fit policy: one address-ordered free list over every segment, split and coalesce.
//
// Segments are obtained exactly as the caching policy obtains them (2 MiB for requests up to
// 1 MiB, 20 MiB up to 10 MiB, the request rounded to 2 MiB above), and requests are rounded to
// 512 bytes. The difference is the choice of block: caching takes the smallest free block that
// fits (best fit, per pool); first_fit takes the free block at the lowest address that fits, in
// any segment. The block is split (the rest stays free right after it), and a freed block merges
// with its free address neighbours, so no two free blocks in a segment are adjacent. When no
// block fits, a new segment is obtained; when the source is full, fully free segments are
// returned and the request retried once (num_alloc_retries), then OutOfMemoryError.
//
// The free list is a balanced tree walked from the lowest address, so a lookup costs the number
// of free blocks below the one chosen; with the few hundred free blocks of a training step that
// is cheap, and the simplicity is the point of the policy.
#pragma once

#include <set>

#include "allocator/config.h"
#include "allocator/policy_allocator.h"

namespace memgrad {

class FirstFitAllocator final : public PolicyAllocator {
 public:
  // Uses `config.memory_fraction`; the caching-only options are ignored. Throws ConfigError.
  explicit FirstFitAllocator(MemorySource& source, const AllocatorConfig& config = {});
  ~FirstFitAllocator() override;

  std::string_view policy_name() const override { return "first_fit"; }

 protected:
  // Allocates: nbytes rounded up to 512 (Block::nbytes), in the lowest-addressed free block that
  // fits; a new segment (caching's sizes) when none does.
  Placement place(const Request& request) override;
  // Merges the block with its free address neighbours.
  SplitTally take_back(const Block& block) override;
  // Returns every segment with no allocated block to the source; whether there was one.
  bool release_cached() override;
  // Segments by address, tiled by their blocks (coalesced: no two free neighbours).
  void describe(std::vector<SegmentSnapshot>& out) const override;

 private:
  struct Segment;
  struct Rec {
    char* ptr = nullptr;
    size_t nbytes = 0;
    size_t requested = 0;  // allocated blocks only
    bool allocated = false;
    Segment* segment = nullptr;
    Rec* prev = nullptr;  // address neighbours in the segment
    Rec* next = nullptr;
  };
  struct Segment {
    char* ptr = nullptr;
    size_t nbytes = 0;
    StatPool pool = StatPool::LargePool;
    Rec* head = nullptr;
    size_t live = 0;  // allocated blocks
    size_t free_blocks = 0;
    size_t free_bytes = 0;
  };
  struct ByAddress {
    template <typename T>
    bool operator()(const T* a, const T* b) const {
      return a->ptr < b->ptr;
    }
  };

  Rec* first_fit(size_t size) const;
  Rec* new_segment(size_t nbytes);
  Placement split_off(Rec* rec, size_t size, size_t requested);
  void add_free(Rec* rec);
  void remove_free(Rec* rec);
  Rec* merge(Rec* left, Rec* right);  // right's bytes join left; right is deleted
  static SplitTally tally(const Segment& seg);

  std::set<Rec*, ByAddress> free_;          // every free block, by address
  std::set<Segment*, ByAddress> segments_;  // by address
};

}  // namespace memgrad
