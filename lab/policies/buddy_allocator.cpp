// BuddyAllocator: split down to the block's order, merge with the buddy on free.
#include "lab/policies/buddy_allocator.h"

#include <bit>

#include "allocator/error.h"

namespace memgrad {
namespace {

size_t order_of(size_t pow2) { return static_cast<size_t>(std::countr_zero(pow2)); }

}  // namespace

BuddyAllocator::BuddyAllocator(MemorySource& source, const AllocatorConfig& config)
    : PolicyAllocator(source, config.memory_fraction) {}

// The frame returns the arenas' memory.
BuddyAllocator::~BuddyAllocator() {
  for (auto& [ptr, arena] : arenas_) delete arena;
}

size_t BuddyAllocator::block_size(size_t nbytes) {
  return std::bit_ceil(std::max(nbytes, kMinBlock));
}

SplitTally BuddyAllocator::tally(const Arena& arena) {
  if (arena.live == 0) return {};
  return {static_cast<int64_t>(arena.free_blocks), static_cast<int64_t>(arena.free_bytes)};
}

void BuddyAllocator::add_free(Arena& arena, size_t offset, size_t nbytes) {
  arena.blocks[offset] = Node{nbytes, 0, false};
  free_[order_of(nbytes)].emplace(arena.ptr + offset, &arena);
  ++arena.free_blocks;
  arena.free_bytes += nbytes;
}

void BuddyAllocator::remove_free(Arena& arena, size_t offset, size_t nbytes) {
  free_[order_of(nbytes)].erase(arena.ptr + offset);
  --arena.free_blocks;
  arena.free_bytes -= nbytes;
}

BuddyAllocator::Arena* BuddyAllocator::new_arena(size_t nbytes) {
  const StatPool pool = pool_of_segment(nbytes);
  void* ptr = obtain_segment(pool, nbytes);
  if (ptr == nullptr) return nullptr;
  auto* arena = new Arena{static_cast<char*>(ptr), nbytes, pool};
  arenas_.emplace(arena->ptr, arena);
  add_free(*arena, 0, nbytes);
  return arena;
}

char* BuddyAllocator::take_free(size_t order, Arena** arena) {
  for (size_t k = order; k < kOrders; ++k) {
    if (free_[k].empty()) continue;
    auto it = free_[k].begin();
    *arena = it->second;
    return it->first;
  }
  return nullptr;
}

Placement BuddyAllocator::place(const Request& request) {
  const size_t size = block_size(request.nbytes);
  Arena* arena = nullptr;
  char* ptr = take_free(order_of(size), &arena);
  if (ptr == nullptr) {
    // A full arena if the source has room, else one just large enough for the block.
    arena = size < kArenaSize ? new_arena(kArenaSize) : nullptr;
    if (arena == nullptr) arena = new_arena(size);
    if (arena == nullptr) return Placement::refused(size);
    ptr = arena->ptr;
  }
  const SplitTally before = tally(*arena);
  size_t offset = static_cast<size_t>(ptr - arena->ptr);
  size_t have = arena->blocks.at(offset).nbytes;
  remove_free(*arena, offset, have);
  // Halve until the block has the requested order; each upper half is a free buddy.
  while (have > size) {
    have /= 2;
    add_free(*arena, offset + have, have);
  }
  arena->blocks[offset] = Node{size, request.nbytes, true};
  ++arena->live;
  return Placement{ptr, size, arena->pool, arena, tally(*arena) - before};
}

SplitTally BuddyAllocator::take_back(const Block& block) {
  auto* arena = static_cast<Arena*>(block.record);
  size_t offset = static_cast<size_t>(static_cast<char*>(block.ptr) - arena->ptr);
  auto it = arena->blocks.find(offset);
  internal_check(it != arena->blocks.end() && it->second.allocated,
                 "buddy: free of a block that is not allocated (double free?)");
  const SplitTally before = tally(*arena);
  size_t size = it->second.nbytes;
  --arena->live;
  arena->blocks.erase(it);
  // Merge with the buddy while it is free and of the same size.
  while (size < arena->nbytes) {
    const size_t buddy = offset ^ size;
    auto b = arena->blocks.find(buddy);
    if (b == arena->blocks.end() || b->second.allocated || b->second.nbytes != size) break;
    remove_free(*arena, buddy, size);
    arena->blocks.erase(b);
    offset = std::min(offset, buddy);
    size *= 2;
  }
  add_free(*arena, offset, size);
  return tally(*arena) - before;
}

bool BuddyAllocator::release_cached() {
  bool released = false;
  for (auto it = arenas_.begin(); it != arenas_.end();) {
    Arena* arena = it->second;
    if (arena->live > 0) {
      ++it;
      continue;
    }
    remove_free(*arena, 0, arena->nbytes);  // nothing allocated: merged back into one block
    return_segment(arena->pool, arena->ptr, arena->nbytes);
    it = arenas_.erase(it);
    delete arena;
    released = true;
  }
  return released;
}

void BuddyAllocator::describe(std::vector<SegmentSnapshot>& out) const {
  for (const auto& [ptr, arena] : arenas_) {
    SegmentSnapshot s = segment_at(ptr, arena->nbytes, arena->pool);
    for (const auto& [offset, node] : arena->blocks) {
      s.blocks.push_back({s.address + offset, node.nbytes, node.requested, node.allocated, false});
    }
    out.push_back(std::move(s));
  }
}

}  // namespace memgrad
