// The caching allocator's data structures: block records, segments, and the free-block index.
//
// A segment is one range obtained from the memory source. It is tiled by blocks, linked to their
// address neighbours (prev/next) so that a freed block can merge with free neighbours and a fully
// free segment collapses back into a single block. Free blocks are indexed by (size, address): a
// lookup returns the smallest free block that fits, the lowest address among equals (PyTorch's
// best fit). Streams partition the index: a block freed on one stream is found only by requests
// on that stream.
//
// The index is built for the cache-hit path: sizes up to 2 MiB (every block of the small pool)
// live in exact-size bins (512-byte steps) with a bitmap to find the first non-empty bin, so
// insert, erase and lookup are O(1) plus a walk of the few same-size blocks; larger blocks live
// in an ordered set. Records come from a free list, so the hot path never calls malloc.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "allocator/stream.h"

namespace memgrad::detail {

struct Segment;

// One block: a piece of a segment, handed out or cached.
struct BlockRecord {
  char* ptr = nullptr;        // first byte
  size_t size = 0;            // bytes (a multiple of 512)
  size_t requested_size = 0;  // bytes the caller asked for (allocated blocks only)
  StreamId stream = kDefaultStream;
  Segment* segment = nullptr;         // the segment this block tiles
  BlockRecord* prev = nullptr;        // address neighbour below, in the same segment
  BlockRecord* next = nullptr;        // address neighbour above, in the same segment
  bool allocated = false;             // handed out to a caller
  bool in_index = false;              // present in a FreeBlockIndex
  int event_count = 0;                // outstanding stream events before the block may be reused
  std::vector<StreamId> stream_uses;  // other streams that used it (record_stream)
  size_t gc_count_base = 0;           // the pool's lookup counter when the block was cached
  BlockRecord* bin_prev = nullptr;    // neighbours in an exact-size bin (address order)
  BlockRecord* bin_next = nullptr;

  bool is_split() const { return prev != nullptr || next != nullptr; }
};

// One range obtained from the memory source.
struct Segment {
  char* ptr = nullptr;
  size_t size = 0;
  StreamId stream = kDefaultStream;
  bool small_pool = false;
  BlockRecord* head = nullptr;  // the block at the lowest address
};

// Recycles BlockRecords without returning them to malloc.
class RecordPool {
 public:
  RecordPool() = default;
  RecordPool(const RecordPool&) = delete;
  RecordPool& operator=(const RecordPool&) = delete;
  ~RecordPool();

  BlockRecord* make();  // a default-initialised record
  void recycle(BlockRecord* record);

 private:
  std::vector<BlockRecord*> free_;
  std::vector<BlockRecord*> all_;
};

// Orders blocks by (size, address).
struct BySizeThenAddress {
  bool operator()(const BlockRecord* a, const BlockRecord* b) const {
    return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
  }
};

// Free blocks of one stream, ordered by (size, address).
class FreeBlockIndex {
 public:
  void insert(BlockRecord* block);
  void erase(BlockRecord* block);
  // The smallest block with size >= `size`, the lowest address among equals; nullptr if none.
  BlockRecord* best_fit(size_t size) const;
  // The blocks in (size, address) order.
  std::vector<BlockRecord*> blocks() const;
  size_t count() const { return count_; }

  static constexpr size_t kBinStep = 512;                // bytes between bins
  static constexpr size_t kMaxBinned = 2 * 1024 * 1024;  // largest size kept in a bin
  static constexpr size_t kNumBins = kMaxBinned / kBinStep + 1;

 private:
  static constexpr size_t kWords = (kNumBins + 63) / 64;
  static constexpr size_t kSummaryWords = (kWords + 63) / 64;
  size_t first_bin_at_or_after(size_t bin) const;  // kNumBins if none
  void mark(size_t bin);
  void unmark(size_t bin);

  std::array<BlockRecord*, kNumBins> bins_{};        // heads, each list sorted by address
  std::array<BlockRecord*, kNumBins> tails_{};       // the last (highest-addressed) of each list
  std::array<uint64_t, kWords> bitmap_{};            // bit b set <=> bins_[b] is non-empty
  std::array<uint64_t, kSummaryWords> summary_{};    // bit w set <=> bitmap_[w] != 0
  std::set<BlockRecord*, BySizeThenAddress> large_;  // blocks above kMaxBinned
  size_t count_ = 0;
};

// A pool (small or large) of cached blocks, partitioned by stream.
class BlockPool {
 public:
  explicit BlockPool(bool small);

  bool is_small() const { return small_; }
  void insert(BlockRecord* block);
  void erase(BlockRecord* block);
  // Best fit on `stream`; counts the lookup for garbage collection ages.
  BlockRecord* best_fit(StreamId stream, size_t size);
  // The same without counting the lookup, and the count alone: what the caching allocator uses
  // to check that reusing the block it last freed is what best_fit would pick.
  BlockRecord* peek_best_fit(StreamId stream, size_t size) const {
    const FreeBlockIndex* index = stream == kDefaultStream ? default_index_ : find_index(stream);
    return index == nullptr ? nullptr : index->best_fit(size);
  }
  void count_lookup() { ++lookups_; }
  size_t lookups() const { return lookups_; }
  // The free blocks of `stream` (or of every stream) in (size, address) order.
  std::vector<BlockRecord*> blocks(StreamId stream) const;
  std::vector<BlockRecord*> all_blocks() const;
  // Lookups since the block was cached (its garbage-collection age).
  size_t age(const BlockRecord* block) const { return lookups_ - block->gc_count_base; }

 private:
  FreeBlockIndex& index_for(StreamId stream) {
    return stream == kDefaultStream ? *default_index_ : other_index_for(stream);
  }
  FreeBlockIndex& other_index_for(StreamId stream);
  const FreeBlockIndex* find_index(StreamId stream) const;

  bool small_;
  size_t lookups_ = 0;
  // The default stream's index is first; other streams are appended when first seen.
  std::vector<std::pair<StreamId, std::unique_ptr<FreeBlockIndex>>> indexes_;
  FreeBlockIndex* default_index_;
};

}  // namespace memgrad::detail

#include "allocator/block_pool_inl.h"  // IWYU pragma: export
