// The buddy policy: power-of-two blocks carved out of large power-of-two arenas.
//
// Every request is rounded up to a power of two of at least 512 bytes (so up to half of a block
// is internal waste: allocated_bytes - requested_bytes). Arenas of 32 MiB (or the block size, for
// larger blocks) are obtained from the source. A block of size 2^k is taken from the free list of
// order k, lowest address first; when that list is empty, a block of the next order that has one
// is halved until it is 2^k, and each unused upper half (its "buddy") goes on its own list. On
// free, a block merges with its buddy (the block at offset ^ size) while the buddy is free and
// whole, all the way back to the whole arena. Blocks therefore always sit at offsets that are a
// multiple of their size, and a free block may neighbour another free block that is not its
// buddy: snapshots are tiled but not coalesced. Arenas with nothing allocated are returned by
// empty_cache(), and before an OutOfMemoryError.
#pragma once

#include <array>
#include <map>

#include "allocator/config.h"
#include "allocator/policy_allocator.h"

namespace memgrad {

class BuddyAllocator final : public PolicyAllocator {
 public:
  // Uses `config.memory_fraction`; the caching-only options are ignored. Throws ConfigError.
  explicit BuddyAllocator(MemorySource& source, const AllocatorConfig& config = {});
  ~BuddyAllocator() override;

  std::string_view policy_name() const override { return "buddy"; }

  // The block a request of `nbytes` gets: the next power of two, at least kMinBlock.
  static size_t block_size(size_t nbytes);

  static constexpr size_t kMinBlock = 512;         // bytes, order 9
  static constexpr size_t kArenaSize = 32 * kMiB;  // default arena, bytes

 protected:
  // Allocates: block_size(nbytes) (Block::nbytes), halving the smallest free block that fits; a
  // new arena (kArenaSize, or just the block when the source has no room for one) when none does.
  Placement place(const Request& request) override;
  // Merges the block with its buddy while the buddy is free and of its size.
  SplitTally take_back(const Block& block) override;
  // Returns every arena with no allocated block to the source; whether there was one.
  bool release_cached() override;
  // One segment per arena, tiled by its blocks (free buddies of different orders may touch).
  void describe(std::vector<SegmentSnapshot>& out) const override;

 private:
  struct Node {
    size_t nbytes = 0;
    size_t requested = 0;  // allocated blocks only
    bool allocated = false;
  };
  struct Arena {
    char* ptr = nullptr;
    size_t nbytes = 0;
    StatPool pool = StatPool::LargePool;
    std::map<size_t, Node> blocks{};  // offset -> block; the blocks tile the arena
    size_t live = 0;
    size_t free_blocks = 0;
    size_t free_bytes = 0;
  };
  static constexpr size_t kOrders = 64;

  char* take_free(size_t order, Arena** arena);  // lowest free block of the smallest order >= order
  Arena* new_arena(size_t nbytes);
  void add_free(Arena& arena, size_t offset, size_t nbytes);
  void remove_free(Arena& arena, size_t offset, size_t nbytes);
  static SplitTally tally(const Arena& arena);

  std::array<std::map<char*, Arena*>, kOrders> free_;  // per order: free blocks by address
  std::map<char*, Arena*> arenas_;                     // by address
};

}  // namespace memgrad
