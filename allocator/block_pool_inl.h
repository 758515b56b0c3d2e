// The hot path of the block pool (every cache hit runs through it), kept inline so the caching
// allocator compiles it into its own allocate/free. Included only from block_pool.h.
#pragma once

#include <bit>

#include "allocator/error.h"

namespace memgrad::detail {

inline BlockRecord* RecordPool::make() {
  if (free_.empty()) {
    all_.push_back(new BlockRecord());
    return all_.back();
  }
  BlockRecord* r = free_.back();
  free_.pop_back();
  return r;
}

inline void RecordPool::recycle(BlockRecord* record) {
  // Reset field by field: assigning a fresh record would rebuild stream_uses' buffer.
  record->ptr = nullptr;
  record->size = record->requested_size = 0;
  record->stream = kDefaultStream;
  record->segment = nullptr;
  record->prev = record->next = nullptr;
  record->allocated = record->in_index = false;
  record->event_count = 0;
  record->stream_uses.clear();
  record->gc_count_base = 0;
  record->bin_prev = record->bin_next = nullptr;
  free_.push_back(record);
}

// ---- FreeBlockIndex ----

inline void FreeBlockIndex::insert(BlockRecord* block) {
  internal_check(!block->in_index, "block inserted twice into a free index");
  internal_check(block->size % kBinStep == 0, "block size is not a multiple of 512");
  block->in_index = true;
  ++count_;
  if (block->size > kMaxBinned) {
    large_.insert(block);
    return;
  }
  const size_t bin = block->size / kBinStep;
  // Keep the bin sorted by address: the head is the lowest address of that size. Blocks freed
  // in address order (or its reverse), as a program frees the tensors it made one after the
  // other, go to an end in O(1); only a block between others walks the list.
  BlockRecord* prev = nullptr;
  BlockRecord* cur = bins_[bin];
  if (cur != nullptr && tails_[bin]->ptr < block->ptr) {
    prev = tails_[bin];
    cur = nullptr;
  }
  while (cur != nullptr && cur->ptr < block->ptr) {
    prev = cur;
    cur = cur->bin_next;
  }
  block->bin_prev = prev;
  block->bin_next = cur;
  if (cur != nullptr) {
    cur->bin_prev = block;
  } else {
    tails_[bin] = block;
  }
  if (prev != nullptr) {
    prev->bin_next = block;
  } else {
    if (bins_[bin] == nullptr) mark(bin);
    bins_[bin] = block;
  }
}

inline void FreeBlockIndex::mark(size_t bin) {
  bitmap_[bin / 64] |= uint64_t{1} << (bin % 64);
  summary_[bin / 4096] |= uint64_t{1} << (bin / 64 % 64);
}

inline void FreeBlockIndex::unmark(size_t bin) {
  bitmap_[bin / 64] &= ~(uint64_t{1} << (bin % 64));
  if (bitmap_[bin / 64] == 0) summary_[bin / 4096] &= ~(uint64_t{1} << (bin / 64 % 64));
}

inline void FreeBlockIndex::erase(BlockRecord* block) {
  internal_check(block->in_index, "erasing a block that is not in the free index");
  block->in_index = false;
  --count_;
  if (block->size > kMaxBinned) {
    large_.erase(block);
    return;
  }
  const size_t bin = block->size / kBinStep;
  if (block->bin_next != nullptr) {
    block->bin_next->bin_prev = block->bin_prev;
  } else {
    tails_[bin] = block->bin_prev;
  }
  if (block->bin_prev != nullptr) {
    block->bin_prev->bin_next = block->bin_next;
  } else {
    bins_[bin] = block->bin_next;
    if (bins_[bin] == nullptr) unmark(bin);
  }
  block->bin_prev = block->bin_next = nullptr;
}

inline size_t FreeBlockIndex::first_bin_at_or_after(size_t bin) const {
  if (bin >= kNumBins) return kNumBins;
  const size_t word = bin / 64;
  const uint64_t bits = bitmap_[word] & (~uint64_t{0} << (bin % 64));
  if (bits != 0) return word * 64 + static_cast<size_t>(std::countr_zero(bits));
  // The summary finds the next non-empty bitmap word without scanning the empty ones.
  size_t next = word + 1;
  while (next < kWords) {
    const uint64_t s = summary_[next / 64] & (~uint64_t{0} << (next % 64));
    if (s != 0) {
      const size_t w = next / 64 * 64 + static_cast<size_t>(std::countr_zero(s));
      return w * 64 + static_cast<size_t>(std::countr_zero(bitmap_[w]));
    }
    next = (next / 64 + 1) * 64;
  }
  return kNumBins;
}

inline BlockRecord* FreeBlockIndex::best_fit(size_t size) const {
  if (size <= kMaxBinned) {
    const size_t bin = first_bin_at_or_after((size + kBinStep - 1) / kBinStep);
    if (bin < kNumBins) return bins_[bin];
    return large_.empty() ? nullptr : *large_.begin();
  }
  BlockRecord key;
  key.size = size;
  key.ptr = nullptr;
  auto it = large_.lower_bound(&key);
  return it == large_.end() ? nullptr : *it;
}

inline void BlockPool::insert(BlockRecord* block) {
  block->gc_count_base = lookups_;
  index_for(block->stream).insert(block);
}

inline void BlockPool::erase(BlockRecord* block) { index_for(block->stream).erase(block); }

inline BlockRecord* BlockPool::best_fit(StreamId stream, size_t size) {
  ++lookups_;
  const FreeBlockIndex* index = stream == kDefaultStream ? default_index_ : find_index(stream);
  return index == nullptr ? nullptr : index->best_fit(size);
}

}  // namespace memgrad::detail
