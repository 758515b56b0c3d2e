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

BuddyAllocator::~BuddyAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [ptr, arena] : arenas_) {
    source_.free(ptr, arena->nbytes);
    delete arena;
  }
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

Block BuddyAllocator::allocate_block(size_t nbytes, StreamId stream) {
  const size_t size = block_size(nbytes);
  std::lock_guard<std::mutex> lock(mutex_);
  Arena* arena = nullptr;
  char* ptr = take_free(order_of(size), &arena);
  if (ptr == nullptr) {
    // A full arena if the source has room, else one just large enough for the block; after
    // returning empty arenas, once more.
    const auto obtain = [&] {
      Arena* a = size < kArenaSize ? new_arena(kArenaSize) : nullptr;
      return a != nullptr ? a : new_arena(size);
    };
    arena = obtain();
    if (arena == nullptr && release_empty_arenas() > 0) {
      ++stats_.num_alloc_retries;
      arena = obtain();
    }
    if (arena == nullptr) throw_oom(nbytes, size, stream);
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
  arena->blocks[offset] = Node{size, nbytes, true};
  ++arena->live;
  count_alloc(arena->pool, size, nbytes);
  count_split_change(arena->pool, before, tally(*arena));
  trace_event(TraceAction::Alloc, ptr, size, nbytes, stream);
  return Block{ptr, size, nbytes, stream, arena};
}

void BuddyAllocator::free(const Block& block) {
  if (block.record == nullptr) return;
  auto* arena = static_cast<Arena*>(block.record);
  std::lock_guard<std::mutex> lock(mutex_);
  size_t offset = static_cast<size_t>(static_cast<char*>(block.ptr) - arena->ptr);
  auto it = arena->blocks.find(offset);
  internal_check(it != arena->blocks.end() && it->second.allocated,
                 "buddy: free of a block that is not allocated (double free?)");
  const SplitTally before = tally(*arena);
  const Node node = it->second;
  --arena->live;
  count_free(arena->pool, node.nbytes, node.requested);
  trace_event(TraceAction::FreeRequested, block.ptr, node.nbytes, node.requested, block.stream);
  size_t size = node.nbytes;
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
  count_split_change(arena->pool, before, tally(*arena));
  trace_event(TraceAction::FreeCompleted, block.ptr, node.nbytes, node.requested, block.stream);
}

size_t BuddyAllocator::release_empty_arenas() {
  size_t released = 0;
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
    ++released;
  }
  return released;
}

void BuddyAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_empty_arenas();
}

std::vector<SegmentSnapshot> BuddyAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const uintptr_t base = source_.address_base();
  std::vector<SegmentSnapshot> out;
  for (const auto& [ptr, arena] : arenas_) {
    SegmentSnapshot s;
    s.address = reinterpret_cast<uintptr_t>(ptr) - base;
    s.nbytes = arena->nbytes;
    s.small_pool = arena->pool == StatPool::SmallPool;
    for (const auto& [offset, node] : arena->blocks) {
      s.blocks.push_back({s.address + offset, node.nbytes, node.requested, node.allocated, false});
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace memgrad
