// ArenaAllocator: bump in the current chunk; count live blocks; reset a chunk when none is left.
#include "lab/policies/arena_allocator.h"

#include "allocator/error.h"
#include "allocator/sizes.h"

namespace memgrad {

ArenaAllocator::ArenaAllocator(MemorySource& source, const AllocatorConfig& config)
    : PolicyAllocator(source, config.memory_fraction) {}

ArenaAllocator::~ArenaAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [ptr, chunk] : chunks_) {
    source_.free(ptr, chunk->nbytes);
    delete chunk;
  }
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

ArenaAllocator::Chunk* ArenaAllocator::obtain_chunk(size_t size, size_t requested,
                                                    StreamId stream) {
  Chunk* chunk = reuse_chunk(size);
  if (chunk != nullptr) return chunk;
  // A standard chunk when the source has room, else one just large enough; after returning
  // the reset chunks, once more.
  const auto fresh = [&] {
    Chunk* c = size < kChunkSize ? new_chunk(kChunkSize) : nullptr;
    return c != nullptr ? c : new_chunk(size);
  };
  chunk = fresh();
  if (chunk == nullptr && release_empty_chunks() > 0) {
    ++stats_.num_alloc_retries;
    chunk = fresh();
  }
  if (chunk == nullptr) throw_oom(requested, size, stream);
  return chunk;
}

Block ArenaAllocator::allocate_block(size_t nbytes, StreamId stream) {
  const size_t size = round_up(nbytes, kMinBlockSize);
  std::lock_guard<std::mutex> lock(mutex_);
  Chunk* chunk = current_;
  if (size > kChunkSize) {
    chunk = obtain_chunk(size, nbytes, stream);  // a chunk of its own; `current_` stays
  } else if (chunk == nullptr || chunk->nbytes - chunk->bump < size) {
    Chunk* next = obtain_chunk(size, nbytes, stream);
    // The old current chunk keeps its tail unused until it resets (or, if it is already
    // empty, it simply waits to be reused).
    current_ = chunk = next;
  }
  const SplitTally before = tally(*chunk);
  const size_t offset = chunk->bump;
  chunk->pieces[offset] = Piece{size, nbytes, true};
  chunk->bump += size;
  ++chunk->live;
  chunk->live_bytes += size;
  count_alloc(chunk->pool, size, nbytes);
  count_split_change(chunk->pool, before, tally(*chunk));
  char* ptr = chunk->ptr + offset;
  trace_event(TraceAction::Alloc, ptr, size, nbytes, stream);
  return Block{ptr, size, nbytes, stream, chunk};
}

void ArenaAllocator::free(const Block& block) {
  if (block.record == nullptr) return;
  auto* chunk = static_cast<Chunk*>(block.record);
  std::lock_guard<std::mutex> lock(mutex_);
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
  count_free(chunk->pool, piece.nbytes, piece.requested);
  trace_event(TraceAction::FreeRequested, block.ptr, piece.nbytes, piece.requested, block.stream);
  if (chunk->live == 0) {
    // Everything in the chunk is free, in whatever order it was freed: start it over.
    chunk->pieces.clear();
    chunk->bump = 0;
    chunk->dead = 0;
  }
  count_split_change(chunk->pool, before, tally(*chunk));
  trace_event(TraceAction::FreeCompleted, block.ptr, piece.nbytes, piece.requested, block.stream);
}

size_t ArenaAllocator::release_empty_chunks() {
  size_t released = 0;
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
    ++released;
  }
  return released;
}

void ArenaAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_empty_chunks();
}

size_t ArenaAllocator::wasted_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t waste = 0;
  for (const auto& [ptr, chunk] : chunks_) {
    if (chunk->live == 0) continue;
    waste += chunk->nbytes - chunk->live_bytes;
    if (chunk == current_) waste -= chunk->nbytes - chunk->bump;  // the tail is still usable
  }
  return waste;
}

std::vector<SegmentSnapshot> ArenaAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const uintptr_t base = source_.address_base();
  std::vector<SegmentSnapshot> out;
  for (const auto& [ptr, chunk] : chunks_) {
    SegmentSnapshot s;
    s.address = reinterpret_cast<uintptr_t>(ptr) - base;
    s.nbytes = chunk->nbytes;
    s.small_pool = chunk->pool == StatPool::SmallPool;
    for (const auto& [offset, piece] : chunk->pieces) {
      s.blocks.push_back({s.address + offset, piece.nbytes, piece.requested, piece.live, false});
    }
    if (chunk->bump < chunk->nbytes) {
      s.blocks.push_back({s.address + chunk->bump, chunk->nbytes - chunk->bump, 0, false, false});
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace memgrad
