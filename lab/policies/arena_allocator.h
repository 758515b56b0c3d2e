// The arena policy: bump allocation inside chunks; a chunk is reused only once all of it is free.
//
// Requests are rounded to 512 bytes and placed at the current chunk's bump offset, which then
// moves past them: allocation is a pointer increment, and a free only counts the chunk's live
// blocks down. A chunk whose live count reaches zero is reset (its bump offset goes back to 0)
// whatever the order of the frees, so the policy is correct for any free order; what it cannot
// do is reuse the bytes of a freed block while anything else in its chunk lives. Those bytes,
// and the tail left behind when a request does not fit the current chunk, are waste:
// wasted_bytes() reports them, and they appear in inactive_split_bytes (free bytes inside chunks
// that still hold a block, which empty_cache() cannot return). Chunks are 4 MiB; a larger
// request gets a chunk of its own size. Reset chunks are kept for reuse and returned by
// empty_cache(), and before an OutOfMemoryError (ggml's tallocr is the same idea for one
// graph, without the reset).
#pragma once

#include <map>

#include "allocator/config.h"
#include "allocator/policy_allocator.h"

namespace memgrad {

class ArenaAllocator final : public PolicyAllocator {
 public:
  // Uses `config.memory_fraction`; the caching-only options are ignored. Throws ConfigError.
  explicit ArenaAllocator(MemorySource& source, const AllocatorConfig& config = {});
  ~ArenaAllocator() override;

  std::string_view policy_name() const override { return "arena"; }

  // Bytes that cannot be handed out until their chunk resets: freed blocks in chunks that still
  // hold a live block, and the abandoned tails of chunks other than the current one.
  size_t wasted_bytes() const;

  static constexpr size_t kChunkSize = 4 * kMiB;  // bytes

 protected:
  // Allocates: nbytes rounded up to 512 (Block::nbytes) at the current chunk's bump offset, or
  // in a fresh chunk when it does not fit (a chunk of its own above kChunkSize).
  Placement place(const Request& request) override;
  // Marks the block dead; a chunk whose last live block goes starts over.
  SplitTally take_back(const Block& block) override;
  // Returns every chunk with no live block to the source; whether there was one.
  bool release_cached() override;
  // One segment per chunk: its blocks (live and dead, by address) and the unused tail as a free
  // block. Dead blocks are not merged until the chunk resets.
  void describe(std::vector<SegmentSnapshot>& out) const override;

 private:
  struct Piece {
    size_t nbytes = 0;
    size_t requested = 0;  // the caller's bytes while live
    bool live = false;
  };
  struct Chunk {
    char* ptr = nullptr;
    size_t nbytes = 0;
    StatPool pool = StatPool::LargePool;
    size_t bump = 0;  // offset of the next block
    size_t live = 0;  // live blocks
    size_t live_bytes = 0;
    size_t dead = 0;                   // freed blocks not yet reset
    std::map<size_t, Piece> pieces{};  // offset -> block, live or dead, below `bump`
  };

  Chunk* obtain_chunk(size_t size);  // a reset chunk or a new one; nullptr when refused
  Chunk* reuse_chunk(size_t size);   // the smallest reset chunk of at least `size` bytes
  Chunk* new_chunk(size_t nbytes);
  SplitTally tally(const Chunk& chunk) const;

  std::map<char*, Chunk*> chunks_;  // every chunk, by address
  Chunk* current_ = nullptr;        // the chunk regular requests bump in
};

}  // namespace memgrad
