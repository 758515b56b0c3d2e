// CachingAllocator: PyTorch's DeviceCachingAllocator rules over any MemorySource.
//
// The structure follows the PyTorch source closely so that a reader can hold the two side by
// side: malloc = round -> pick pool -> best fit -> (new segment | release cache and retry | OOM)
// -> split; free = merge with free neighbours -> back into the pool. The frame
// (PolicyAllocator) counts at the same points and by the same amounts, so the numbers match
// torch.cuda.memory_stats().
#include "allocator/caching_allocator.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "allocator/error.h"

namespace memgrad {
namespace {

bool segment_before(const detail::Segment* a, const detail::Segment* b) { return a->ptr < b->ptr; }

// PyTorch's roundup_power2_next_division: split [2^k, 2^(k+1)) into `divisions` equal steps.
size_t roundup_power2_next_division(size_t size, size_t divisions) {
  if (std::has_single_bit(size)) return size;
  const size_t floor = std::bit_floor(size);
  const size_t step = floor >> std::countr_zero(divisions);
  if (step == 0) return floor << 1;
  const size_t rounded_down = size & ~(step - 1);
  return rounded_down == size ? size : rounded_down + step;
}

}  // namespace

CachingAllocator::CachingAllocator(MemorySource& source, AllocatorConfig config)
    : PolicyAllocator(source, config.memory_fraction),
      config_(std::move(config)),
      segments_(segment_before) {
  config_.policy = "caching";
  config_.validate();
  for (size_t d : config_.roundup_power2_divisions) any_divisions_ |= d > 1;
  set_max_split_size(config_.max_split_size);
}

// The frame returns the segments' memory; the records go with records_.
CachingAllocator::~CachingAllocator() {
  for (detail::Segment* seg : segments_) delete seg;
}

// ---- sizes ----

size_t CachingAllocator::round_size(size_t nbytes) const {
  if (!any_divisions_) return std::max(kMinBlockSize, round_up(nbytes, kMinBlockSize));
  return round_size(nbytes, config_);
}

size_t CachingAllocator::round_size(size_t nbytes, const AllocatorConfig& config) {
  if (nbytes < kMinBlockSize) return kMinBlockSize;
  const size_t divisions = config.divisions_for(nbytes);
  if (divisions > 1 && nbytes > kMinBlockSize * divisions) {
    return roundup_power2_next_division(nbytes, divisions);
  }
  return kMinBlockSize * ((nbytes + kMinBlockSize - 1) / kMinBlockSize);
}

// ---- allocate ----

Placement CachingAllocator::place(const Request& request) {
  process_events();
  const size_t size = round_size(request.nbytes);
  if (last_freed_ != nullptr) {
    if (!request.retry && can_undo(size, request.stream)) return undo(request.nbytes);
    settle();
  }
  BlockPool& pool = pool_for(size);
  const size_t segment_size = caching_segment_size(size);
  BlockRecord* block = nullptr;
  if (request.retry) {
    // After release_cached(), PyTorch tries a new segment only.
    block = alloc_segment(pool, request.stream, segment_size);
  } else {
    block = get_free_block(pool, request.stream, size);
    if (block == nullptr && fraction_set() && config_.garbage_collection_threshold > 0.0) {
      garbage_collect();
    }
    if (block == nullptr) block = alloc_segment(pool, request.stream, segment_size);
    if (block == nullptr && release_available_cached_blocks(pool, request.stream, size)) {
      block = alloc_segment(pool, request.stream, segment_size);
    }
  }
  if (block == nullptr) return Placement::refused(segment_size);
  return split_off(block, size, request.nbytes);
}

CachingAllocator::BlockRecord* CachingAllocator::get_free_block(BlockPool& pool, StreamId stream,
                                                                size_t size) {
  BlockRecord* block = pool.best_fit(stream, size);
  if (block == nullptr) return nullptr;
  // An unsplittable oversize block is never used for a small request, and serves a large one
  // only when it wastes less than max_non_split_rounding_size.
  const size_t max_split = config_.max_split_size;
  if (size < max_split && block->size >= max_split) return nullptr;
  // A difference, not size + option: the option may be huge, and best_fit gave block >= size.
  if (size >= max_split && block->size - size >= config_.max_non_split_rounding_size) {
    return nullptr;
  }
  pool.erase(block);
  return block;
}

CachingAllocator::BlockRecord* CachingAllocator::alloc_segment(BlockPool& pool, StreamId stream,
                                                               size_t segment_size) {
  void* ptr = obtain_segment(stat_pool(pool), segment_size, stream);
  if (ptr == nullptr) return nullptr;

  auto* segment =
      new detail::Segment{static_cast<char*>(ptr), segment_size, stream, pool.is_small(), nullptr};
  BlockRecord* block = records_.make();
  block->ptr = segment->ptr;
  block->size = segment_size;
  block->stream = stream;
  block->segment = segment;
  segment->head = block;
  segments_.insert(segment);
  return block;
}

std::optional<PolicyAllocator::Seeded> CachingAllocator::place_seed(const SeedSegment& seed) {
  settle();
  BlockPool& pool = seed.small_pool ? small_ : large_;
  void* ptr = obtain_segment(stat_pool(pool), seed.nbytes, seed.stream);
  if (ptr == nullptr) return std::nullopt;
  auto* segment = new detail::Segment{static_cast<char*>(ptr), seed.nbytes, seed.stream,
                                      seed.small_pool, nullptr};
  segments_.insert(segment);
  Seeded out;
  BlockRecord* prev = nullptr;
  char* at = segment->ptr;
  for (const SeedBlock& b : seed.blocks) {
    BlockRecord* block = records_.make();
    block->ptr = at;
    block->size = b.nbytes;
    block->stream = seed.stream;
    block->segment = segment;
    block->prev = prev;
    (prev != nullptr ? prev->next : segment->head) = block;
    if (b.allocated) {
      block->allocated = true;
      block->requested_size = b.requested;
      out.allocated.emplace_back(block->ptr, block->size, stat_pool(pool), block);
    }
    at += b.nbytes;
    prev = block;
  }
  // Cached once linked, so that is_split() sees the neighbours.
  for (BlockRecord* block = segment->head; block != nullptr; block = block->next) {
    if (block->allocated) continue;
    pool.insert(block);
    if (block->is_split()) {
      out.free_splits.blocks += 1;
      out.free_splits.bytes += static_cast<int64_t>(block->size);
    }
  }
  return out;
}

bool CachingAllocator::should_split(const BlockRecord* block, size_t size) const {
  return splits(block->segment->small_pool, size, block->size - size);
}

bool CachingAllocator::splits(bool small_pool, size_t size, size_t remaining) const {
  if (small_pool) return remaining >= kMinBlockSize;
  return size < config_.max_split_size && remaining > kSmallSize;
}

Placement CachingAllocator::split_off(BlockRecord* block, size_t size, size_t requested) {
  BlockPool& pool = pool_of(block);
  const bool already_split = block->is_split();
  SplitTally split;  // set below, once the block's neighbours are known
  if (should_split(block, size)) {
    // The front stays with the caller; the rest becomes a cached block right after it.
    BlockRecord* rest = records_.make();
    rest->ptr = block->ptr + size;
    rest->size = block->size - size;
    rest->stream = block->stream;
    rest->segment = block->segment;
    rest->prev = block;
    rest->next = block->next;
    if (rest->next != nullptr) rest->next->prev = rest;
    block->next = rest;
    block->size = size;
    pool.insert(rest);
    split = handout_split(already_split, size, rest->size);
  } else {
    split = handout_split(already_split, block->size, 0);
  }
  block->allocated = true;
  block->requested_size = requested;
  return Placement{block->ptr, block->size, stat_pool(pool), block, split};
}

SplitTally CachingAllocator::handout_split(bool was_split, size_t nbytes, size_t rest) {
  if (rest > 0) {
    // An inactive split block shrinks by the bytes handed out, or a new one appears in a
    // segment that was whole.
    return was_split ? SplitTally{0, -static_cast<int64_t>(nbytes)}
                     : SplitTally{1, static_cast<int64_t>(rest)};
  }
  // A whole inactive split block becomes active.
  return was_split ? SplitTally{-1, -static_cast<int64_t>(nbytes)} : SplitTally{};
}

// ---- free ----

Block CachingAllocator::block_of(BlockRecord* record) {
  return Block{
      record->ptr, record->size, record->requested_size, record->stream, stat_pool(pool_of(record)),
      record};
}

void CachingAllocator::process_events() {
  deferred_.process([this](BlockRecord* done) { finish_free(block_of(done)); });
}

bool CachingAllocator::defer_free(const Block& handle) {
  auto* block = static_cast<BlockRecord*>(handle.record);
  internal_check(block->allocated, "free of a block that is not allocated (double free?)");
  block->allocated = false;
  return deferred_.defer(block);
}

SplitTally CachingAllocator::take_back(const Block& handle) {
  auto* block = static_cast<BlockRecord*>(handle.record);
  settle();
  block->requested_size = 0;
  // Kept unmerged (the last free, undone) when the merged block would start where it does.
  // Garbage collection reads cached blocks' ages, which a later merge would move: not then.
  if (reuse_last_free_ && config_.garbage_collection_threshold <= 0.0 && !mergeable(block->prev)) {
    const BlockRecord* next = mergeable(block->next) ? block->next : nullptr;
    SplitTally split;  // what merge_and_cache would return
    if (next != nullptr) split = {-1, -static_cast<int64_t>(next->size)};
    if (block->prev != nullptr || (next != nullptr ? next->next : block->next) != nullptr) {
      split.blocks += 1;
      split.bytes += static_cast<int64_t>(block->size + (next != nullptr ? next->size : 0));
    }
    last_freed_ = block;
    return split;
  }
  return merge_and_cache(block);
}

SplitTally CachingAllocator::merge_and_cache(BlockRecord* block) {
  BlockPool& pool = pool_of(block);
  SplitTally split;
  for (BlockRecord* neighbour : {block->prev, block->next}) {
    const size_t subsumed = try_merge(block, neighbour, pool);
    if (subsumed > 0) {
      split.blocks -= 1;
      split.bytes -= static_cast<int64_t>(subsumed);
    }
  }
  pool.insert(block);
  if (block->is_split()) {
    split.blocks += 1;
    split.bytes += static_cast<int64_t>(block->size);
  }
  return split;
}

void CachingAllocator::settle() const {
  if (last_freed_ == nullptr) return;
  BlockRecord* block = std::exchange(last_freed_, nullptr);
  // How the state is held changes, not what it is: the stats counted the merge at the free.
  const_cast<CachingAllocator*>(this)->merge_and_cache(block);
}

bool CachingAllocator::can_undo(size_t size, StreamId stream) const {
  const BlockRecord* block = last_freed_;
  if (block->size != size || block->stream != stream ||
      block->segment->small_pool != (size <= kSmallSize)) {
    return false;
  }
  const BlockRecord* next = mergeable(block->next) ? block->next : nullptr;
  const size_t merged = block->size + (next != nullptr ? next->size : 0);
  // get_free_block's rules for oversize blocks, on the merged block.
  const size_t max_split = config_.max_split_size;
  if (size < max_split && merged >= max_split) return false;
  if (size >= max_split && merged - size >= config_.max_non_split_rounding_size) return false;
  // split_off must cut the merged block where the block ends (or the block is all of it).
  if (next != nullptr && !splits(block->segment->small_pool, size, next->size)) return false;
  // Best fit over the pool with the merged block in place of `next` must pick the merged block:
  // no cached block of `size` or more comes before it in (size, address) order.
  const auto merged_first = [&](const BlockRecord* other) {
    return other == nullptr || merged < other->size ||
           (merged == other->size && block->ptr < other->ptr);
  };
  const BlockPool& pool = block->segment->small_pool ? small_ : large_;
  const BlockRecord* best = pool.peek_best_fit(stream, size);
  if (best == nullptr || best != next) return merged_first(best);
  // `next` merges away: what follows it in that order must come after the merged block (a
  // block of next's size at a higher address would not).
  if (next->size > detail::FreeBlockIndex::kMaxBinned || next->bin_next != nullptr) return false;
  return merged_first(pool.peek_best_fit(stream, next->size + 1));
}

Placement CachingAllocator::undo(size_t requested) {
  BlockRecord* block = std::exchange(last_freed_, nullptr);
  BlockPool& pool = pool_of(block);
  pool.count_lookup();  // the best fit the merge-and-split path makes
  BlockRecord* next = mergeable(block->next) ? block->next : nullptr;
  // What split_off would return for the merged block.
  const bool merged_split =
      block->prev != nullptr || (next != nullptr ? next->next : block->next) != nullptr;
  if (next != nullptr) next->gc_count_base = pool.lookups();  // the rest's age, split off now
  const SplitTally split =
      handout_split(merged_split, block->size, next != nullptr ? next->size : 0);
  block->allocated = true;
  block->requested_size = requested;
  Placement placed{block->ptr, block->size, stat_pool(pool), block, split};
  // Freed again, it is kept unmerged again and this check passes again, as long as nothing else
  // happens in between and no stream event can complete meanwhile. Garbage collection, which
  // reads the lookups counted above, keeps nothing unmerged (take_back).
  placed.repeatable = deferred_.empty() && block->stream_uses.empty();
  return placed;
}

size_t CachingAllocator::try_merge(BlockRecord* dst, BlockRecord* src, BlockPool& pool) {
  if (!mergeable(src)) return 0;
  if (dst->prev == src) {
    // [src][dst] -> dst takes over src's start.
    dst->ptr = src->ptr;
    dst->prev = src->prev;
    if (dst->prev != nullptr) dst->prev->next = dst;
    if (dst->segment->head == src) dst->segment->head = dst;
  } else {
    // [dst][src]
    dst->next = src->next;
    if (dst->next != nullptr) dst->next->prev = dst;
  }
  const size_t subsumed = src->size;
  dst->size += subsumed;
  pool.erase(src);
  records_.recycle(src);
  return subsumed;
}

void CachingAllocator::note_stream_use(const Block& handle, StreamId stream) {
  if (stream == handle.stream) return;  // uses on the allocation stream are ordered already
  deferred_.record_use(static_cast<BlockRecord*>(handle.record), stream);
}

void CachingAllocator::set_reuse_last_free(bool on) {
  const auto guard = lock();
  settle();
  reuse_last_free_ = on;
}

void CachingAllocator::set_stream_events(StreamEvents* events) {
  const auto guard = lock();
  deferred_.set_events(events);
}

// ---- releasing cached memory ----

void CachingAllocator::release_segment(BlockRecord* block) {
  internal_check(!block->is_split() && !block->allocated, "releasing a block that is in use");
  BlockPool& pool = pool_of(block);
  detail::Segment* segment = block->segment;
  pool.erase(block);
  return_segment(stat_pool(pool), segment->ptr, segment->size, segment->stream);
  segments_.erase(segment);
  delete segment;
  records_.recycle(block);
}

bool CachingAllocator::release_available_cached_blocks(BlockPool& pool, StreamId stream,
                                                       size_t size) {
  // Only oversize (never split) blocks are candidates, so this needs max_split_size.
  const size_t max_split = config_.max_split_size;
  if (max_split == SIZE_MAX) return false;
  const size_t wanted = std::max(size, max_split);
  std::vector<BlockRecord*> candidates = pool.blocks(stream);  // (size, address) order
  auto fit = std::find_if(candidates.begin(), candidates.end(),
                          [&](const BlockRecord* b) { return b->size >= wanted; });
  if (fit != candidates.end()) {
    release_segment(*fit);
    return true;
  }
  // No single block is big enough: release oversize blocks from the largest down.
  size_t released = 0;
  for (auto it = candidates.rbegin(); it != candidates.rend() && released < wanted; ++it) {
    if ((*it)->size < max_split) break;
    if ((*it)->is_split()) continue;
    released += (*it)->size;
    release_segment(*it);
  }
  return released >= wanted;
}

bool CachingAllocator::release_cached() {
  if (!deferred_.empty()) {
    count_sync_all_streams();
    deferred_.synchronize([this](BlockRecord* done) { finish_free(block_of(done)); });
  }
  settle();  // after the frees just finished, the last of which may be kept
  for (BlockPool* pool : {&large_, &small_}) {
    for (BlockRecord* block : pool->all_blocks()) {
      if (!block->is_split()) release_segment(block);
    }
  }
  return true;
}

void CachingAllocator::garbage_collect() {
  // PyTorch's policy: once reserved memory passes threshold x allowed, free whole cached large
  // segments whose age (lookups since they were cached) is at least the average age.
  const auto threshold = static_cast<size_t>(config_.garbage_collection_threshold *
                                             static_cast<double>(allowed_bytes()));
  const auto reserved = static_cast<size_t>(counted().reserved_bytes.all().current);
  if (reserved <= threshold) return;
  const size_t target = reserved - threshold;
  size_t reclaimed = 0;
  bool freed_any = true;
  while (reclaimed < target && freed_any) {
    double total_age = 0.0;
    size_t freeable = 0;
    std::vector<BlockRecord*> blocks = large_.all_blocks();
    for (const BlockRecord* b : blocks) {
      if (!b->is_split()) {
        total_age += static_cast<double>(large_.age(b));
        ++freeable;
      }
    }
    if (freeable == 0) return;
    const double age_threshold = total_age / static_cast<double>(freeable);
    freed_any = false;
    for (BlockRecord* b : blocks) {
      if (!b->is_split() && static_cast<double>(large_.age(b)) >= age_threshold) {
        reclaimed += b->size;
        freed_any = true;
        release_segment(b);
      }
    }
  }
}

// ---- snapshots ----

void CachingAllocator::describe(std::vector<SegmentSnapshot>& out) const {
  settle();
  for (const detail::Segment* seg : segments_) {
    const StatPool pool = seg->small_pool ? StatPool::SmallPool : StatPool::LargePool;
    SegmentSnapshot s = segment_at(seg->ptr, seg->size, pool, seg->stream);
    for (const BlockRecord* b = seg->head; b != nullptr; b = b->next) {
      s.blocks.push_back({trace_address(b->ptr), b->size, b->requested_size, b->allocated,
                          !b->allocated && b->event_count > 0});
    }
    out.push_back(std::move(s));
  }
}

}  // namespace memgrad
