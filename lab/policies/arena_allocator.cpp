// ArenaAllocator: bump in the current chunk; count live blocks; reset a chunk when none is left.
#include "lab/policies/arena_allocator.h"

#include "allocator/error.h"
#include "allocator/sizes.h"

namespace memgrad {

ArenaAllocator::ArenaAllocator(MemorySource& source, const AllocatorConfig& config)
    : PolicyAllocator(source, config.memory_fraction) {}

// The frame returns the chunks' memory.
ArenaAllocator::~ArenaAllocator() {
  for (auto& [ptr, chunk] : chunks_) delete chunk;
}

SplitTally ArenaAllocator::tally(const Chunk& chunk) const {
  if (chunk.live == 0) return {};
  const size_t tail = chunk.nbytes - chunk.bump;
  return {static_cast<int64_t>(chunk.dead + (tail > 0 ? 1 : 0)),
          static_cast<int64_t>(chunk.nbytes - chunk.live_bytes)};
}

ArenaAllocator::Chunk* ArenaAllocator::new_chunk(size_t nbytes) {
  const StatPool pool = pool_of_segment(nbytes);
  void* ptr = obtain_segment(pool, nbytes);
  if (ptr == nullptr) return nullptr;
  auto* chunk = new Chunk{static_cast<char*>(ptr), nbytes, pool};
  chunks_.emplace(chunk->ptr, chunk);
  return chunk;
}

ArenaAllocator::Chunk* ArenaAllocator::reuse_chunk(size_t size) {
  Chunk* best = nullptr;
  for (auto& [ptr, chunk] : chunks_) {
    if (chunk->live > 0 || chunk == current_ || chunk->nbytes < size) continue;
    if (best == nullptr || chunk->nbytes < best->nbytes) best = chunk;
  }
  return best;
}

ArenaAllocator::Chunk* ArenaAllocator::obtain_chunk(size_t size) {
  Chunk* chunk = reuse_chunk(size);
  if (chunk != nullptr) return chunk;
  // A standard chunk when the source has room, else one just large enough.
  chunk = size < kChunkSize ? new_chunk(kChunkSize) : nullptr;
  return chunk != nullptr ? chunk : new_chunk(size);
}

Placement ArenaAllocator::place(const Request& request) {
  const size_t size = round_up(request.nbytes, kMinBlockSize);
  Chunk* chunk = current_;
  if (size > kChunkSize) {
    chunk = obtain_chunk(size);  // a chunk of its own; `current_` stays
    if (chunk == nullptr) return Placement::refused(size);
  } else if (chunk == nullptr || chunk->nbytes - chunk->bump < size) {
    chunk = obtain_chunk(size);
    if (chunk == nullptr) return Placement::refused(size);
    // The old current chunk keeps its tail unused until it resets (or, if it is already
    // empty, it simply waits to be reused).
    current_ = chunk;
  }
  const SplitTally before = tally(*chunk);
  const size_t offset = chunk->bump;
  chunk->pieces[offset] = Piece{size, request.nbytes, true};
  chunk->bump += size;
  ++chunk->live;
  chunk->live_bytes += size;
  return Placement{chunk->ptr + offset, size, chunk->pool, chunk, tally(*chunk) - before};
}

SplitTally ArenaAllocator::take_back(const Block& block) {
  auto* chunk = static_cast<Chunk*>(block.record);
  auto it = chunk->pieces.find(static_cast<size_t>(static_cast<char*>(block.ptr) - chunk->ptr));
  internal_check(it != chunk->pieces.end() && it->second.live,
                 "arena: free of a block that is not live (double free?)");
  const SplitTally before = tally(*chunk);
  const Piece piece = it->second;
  it->second.live = false;
  it->second.requested = 0;
  --chunk->live;
  chunk->live_bytes -= piece.nbytes;
  ++chunk->dead;
  if (chunk->live == 0) {
    // Everything in the chunk is free, in whatever order it was freed: start it over.
    chunk->pieces.clear();
    chunk->bump = 0;
    chunk->dead = 0;
  }
  return tally(*chunk) - before;
}

bool ArenaAllocator::release_cached() {
  bool released = false;
  for (auto it = chunks_.begin(); it != chunks_.end();) {
    Chunk* chunk = it->second;
    if (chunk->live > 0) {
      ++it;
      continue;
    }
    if (chunk == current_) current_ = nullptr;
    return_segment(chunk->pool, chunk->ptr, chunk->nbytes);
    it = chunks_.erase(it);
    delete chunk;
    released = true;
  }
  return released;
}

size_t ArenaAllocator::wasted_bytes() const {
  const auto guard = lock();
  size_t waste = 0;
  for (const auto& [ptr, chunk] : chunks_) {
    if (chunk->live == 0) continue;
    waste += chunk->nbytes - chunk->live_bytes;
    if (chunk == current_) waste -= chunk->nbytes - chunk->bump;  // the tail is still usable
  }
  return waste;
}

void ArenaAllocator::describe(std::vector<SegmentSnapshot>& out) const {
  for (const auto& [ptr, chunk] : chunks_) {
    SegmentSnapshot s = segment_at(ptr, chunk->nbytes, chunk->pool);
    for (const auto& [offset, piece] : chunk->pieces) {
      s.blocks.push_back({s.address + offset, piece.nbytes, piece.requested, piece.live, false});
    }
    if (chunk->bump < chunk->nbytes) {
      s.blocks.push_back({s.address + chunk->bump, chunk->nbytes - chunk->bump, 0, false, false});
    }
    out.push_back(std::move(s));
  }
}

}  // namespace memgrad
