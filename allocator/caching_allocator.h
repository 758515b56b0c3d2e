// The caching policy, modelled on PyTorch's CUDA caching allocator.
//
// Freed blocks are not returned to the source; they stay cached in one of two pools and serve
// later requests of a similar size without a source call. The rules are PyTorch's, constant for
// constant:
//   - every request is rounded up to a multiple of 512 bytes (or to a power-of-two division with
//     roundup_power2_divisions);
//   - requests of at most 1 MiB use the small pool, whose segments are 2 MiB; larger requests use
//     the large pool, with 20 MiB segments below 10 MiB and segments rounded up to 2 MiB above;
//   - the smallest cached block that fits is used, lowest address first; a block is split when
//     the rest is worth keeping (>= 512 bytes in the small pool, > 1 MiB in the large pool and
//     only for requests below max_split_size);
//   - a freed block merges with free neighbours in its segment;
//   - when the source is full: release cached blocks and retry, then throw OutOfMemoryError.
// So memory_allocated() drops when a tensor dies, memory_reserved() does not, and empty_cache()
// returns only segments with nothing allocated in them.
#pragma once

#include <set>

#include "allocator/block_pool.h"
#include "allocator/config.h"
#include "allocator/policy_allocator.h"
#include "allocator/sizes.h"
#include "allocator/stream_events.h"

namespace memgrad {

class CachingAllocator final : public PolicyAllocator {
 public:
  // A caching allocator over `source` with `config`'s options (the policy field is ignored).
  // Throws ConfigError for out-of-range options.
  CachingAllocator(MemorySource& source, AllocatorConfig config = {});
  ~CachingAllocator() override;

  std::string_view policy_name() const override { return "caching"; }

  // Installs the event provider for record_stream (the CUDA backend does this). Not owned.
  void set_stream_events(StreamEvents* events);

  // The size a request of `nbytes` is rounded to (512-byte multiples or power-of-two divisions).
  size_t round_size(size_t nbytes) const;
  // The same under `config`'s roundup_power2_divisions.
  static size_t round_size(size_t nbytes, const AllocatorConfig& config);

  // The options it was built with (set_memory_fraction() changes the limit, not this copy).
  const AllocatorConfig& config() const { return config_; }

  // Whether a block freed and asked for again at once is handed back without its merge and
  // split (below); on by default. Blocks, statistics, traces and snapshots are the same either
  // way; the tests turn it off to compare.
  void set_reuse_last_free(bool on);

 protected:
  // malloc: round -> pool -> best fit -> (collect garbage | new segment | release oversize
  // cached blocks and a new segment) -> split; the retry after release_cached() only obtains a
  // new segment, as PyTorch's does.
  Placement place(const Request& request) override;
  // Merges the block with its free neighbours and returns it to its pool.
  SplitTally take_back(const Block& block) override;
  // Waits for every pending stream event, then returns every cached segment that is whole.
  // Always true: PyTorch retries (and counts the retry) whatever was released.
  bool release_cached() override;
  void describe(std::vector<SegmentSnapshot>& out) const override;
  // A segment of exactly segment.nbytes in its pool, its blocks linked as described.
  std::optional<Seeded> place_seed(const SeedSegment& segment) override;
  // Waits when other streams used the block (record_stream).
  bool defer_free(const Block& block) override;
  void note_stream_use(const Block& block, StreamId stream) override;
  // The segment a request of `nbytes` would obtain: caching_segment_size(round_size(nbytes)).
  size_t source_bytes_for(size_t nbytes) const override {
    return caching_segment_size(round_size(nbytes));
  }

 private:
  using BlockRecord = detail::BlockRecord;
  using BlockPool = detail::BlockPool;

  static StatPool stat_pool(const BlockPool& pool) {
    return pool.is_small() ? StatPool::SmallPool : StatPool::LargePool;
  }
  BlockPool& pool_for(size_t rounded) { return rounded <= kSmallSize ? small_ : large_; }
  BlockPool& pool_of(const BlockRecord* block) {
    return block->segment->small_pool ? small_ : large_;
  }
  // The Block a caller holds for `record`.
  Block block_of(BlockRecord* record);
  void process_events();

  BlockRecord* get_free_block(BlockPool& pool, StreamId stream, size_t size);
  BlockRecord* alloc_segment(BlockPool& pool, StreamId stream, size_t segment_size);
  Placement split_off(BlockRecord* block, size_t size, size_t requested);
  // How handing out `nbytes` of a cached block changes the inactive_split stats: the block was
  // in a segment with other blocks (`was_split`), and `rest` bytes stay cached after it (0: the
  // block goes whole).
  static SplitTally handout_split(bool was_split, size_t nbytes, size_t rest);
  size_t try_merge(BlockRecord* dst, BlockRecord* src, BlockPool& pool);
  bool should_split(const BlockRecord* block, size_t size) const;
  // Whether a block in the small (large) pool is split for a request of `size`, leaving
  // `remaining` bytes.
  bool splits(bool small_pool, size_t size, size_t remaining) const;
  void release_segment(BlockRecord* block);
  bool release_available_cached_blocks(BlockPool& pool, StreamId stream, size_t size);
  void garbage_collect();

  // ---- the last free, undone ----
  // A loop that frees a block and asks for the same size again makes PyTorch's allocator merge
  // the block into its free neighbour, then find it as the best fit and split it off again: the
  // same block, the same state. take_back keeps such a block unmerged instead (last_freed_,
  // counted as merged: the split stats it returns are the merge's), and the next request of its
  // size on its stream takes it back when best fit would have picked the merged block and split
  // it at the same place (can_undo); any other call merges it first (settle). So the pair costs
  // no index update and no record, and everything the allocator shows is unchanged. undo marks
  // its placement repeatable, so the frame serves the pairs after it from its hot block without
  // calling the policy at all (allocator/policy_allocator.h).
  // A cached block a neighbour merges with: free, in the pool, and waiting for no stream.
  static bool mergeable(const BlockRecord* block) {
    return block != nullptr && !block->allocated && block->event_count == 0 &&
           block->stream_uses.empty() && block->in_index;
  }
  // take_back's merge: with the free neighbours, into the pool; the change of the split stats.
  SplitTally merge_and_cache(BlockRecord* block);
  // Merges the kept block, if any (a const caller's view does not change: the block counts as
  // merged already).
  void settle() const;
  bool can_undo(size_t size, StreamId stream) const;
  Placement undo(size_t requested);

  AllocatorConfig config_;
  bool any_divisions_ = false;  // whether roundup_power2_divisions is set for any bucket
  detail::RecordPool records_;
  BlockPool small_{true};
  BlockPool large_{false};
  std::set<detail::Segment*, bool (*)(const detail::Segment*, const detail::Segment*)> segments_;
  DeferredFrees<BlockRecord> deferred_;        // freed blocks other streams may still use
  mutable BlockRecord* last_freed_ = nullptr;  // kept unmerged, see "the last free, undone"
  bool reuse_last_free_ = true;
};

}  // namespace memgrad
