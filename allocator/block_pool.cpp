// Block pool internals: the record free list, the binned free-block index, per-stream pools.
#include "allocator/block_pool.h"

#include <bit>

#include "allocator/error.h"

namespace memgrad::detail {

// ---- RecordPool ----

RecordPool::~RecordPool() {
  for (BlockRecord* r : all_) delete r;
}

std::vector<BlockRecord*> FreeBlockIndex::blocks() const {
  std::vector<BlockRecord*> out;
  out.reserve(count_);
  for (size_t bin = first_bin_at_or_after(0); bin < kNumBins;
       bin = first_bin_at_or_after(bin + 1)) {
    for (BlockRecord* b = bins_[bin]; b != nullptr; b = b->bin_next) out.push_back(b);
  }
  out.insert(out.end(), large_.begin(), large_.end());
  return out;
}

// ---- BlockPool ----

BlockPool::BlockPool(bool small) : small_(small) {
  indexes_.emplace_back(kDefaultStream, std::make_unique<FreeBlockIndex>());
  default_index_ = indexes_.front().second.get();
}

FreeBlockIndex& BlockPool::other_index_for(StreamId stream) {
  for (auto& [id, index] : indexes_) {
    if (id == stream) return *index;
  }
  indexes_.emplace_back(stream, std::make_unique<FreeBlockIndex>());
  return *indexes_.back().second;
}

const FreeBlockIndex* BlockPool::find_index(StreamId stream) const {
  for (const auto& [id, index] : indexes_) {
    if (id == stream) return index.get();
  }
  return nullptr;
}

std::vector<BlockRecord*> BlockPool::blocks(StreamId stream) const {
  const FreeBlockIndex* index = find_index(stream);
  return index == nullptr ? std::vector<BlockRecord*>{} : index->blocks();
}

std::vector<BlockRecord*> BlockPool::all_blocks() const {
  std::vector<BlockRecord*> out;
  for (const auto& [id, index] : indexes_) {
    std::vector<BlockRecord*> part = index->blocks();
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

}  // namespace memgrad::detail
