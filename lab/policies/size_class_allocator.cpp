// SizeClassAllocator: per-class slabs, a free-slot bitmap per slab, lowest address first.
#include "lab/policies/size_class_allocator.h"

#include <bit>

#include "allocator/error.h"
#include "allocator/sizes.h"

namespace memgrad {

SizeClassAllocator::SizeClassAllocator(MemorySource& source, const AllocatorConfig& config)
    : PolicyAllocator(source, config.memory_fraction) {}

// The frame returns the slabs' memory.
SizeClassAllocator::~SizeClassAllocator() {
  for (auto& [ptr, slab] : slabs_) delete slab;
}

size_t SizeClassAllocator::class_size(size_t nbytes) {
  constexpr size_t kFineLimit = 4096;  // up to here: multiples of 512
  if (nbytes <= kFineLimit) return round_up(std::max<size_t>(nbytes, 1), kMinBlockSize);
  // Four classes per power of two: (2^k, 2^(k+1)] in steps of 2^k / 4.
  const size_t step = std::bit_floor(nbytes - 1) / 4;
  return round_up(nbytes, step);
}

size_t SizeClassAllocator::slab_size(size_t class_nbytes) {
  if (class_nbytes >= kSlabTarget) return class_nbytes;
  return kSlabTarget / class_nbytes * class_nbytes;
}

SplitTally SizeClassAllocator::tally(const Slab& slab) {
  if (slab.live == 0) return {};
  const size_t free_slots = slab.slots() - slab.live;
  return {static_cast<int64_t>(free_slots), static_cast<int64_t>(free_slots * slab.class_nbytes)};
}

SizeClassAllocator::Slab* SizeClassAllocator::new_slab(size_t class_nbytes) {
  const size_t nbytes = slab_size(class_nbytes);
  const StatPool pool = class_nbytes <= kSmallSize ? StatPool::SmallPool : StatPool::LargePool;
  void* ptr = obtain_segment(pool, nbytes);
  if (ptr == nullptr) return nullptr;
  const size_t slots = nbytes / class_nbytes;
  auto* slab = new Slab{static_cast<char*>(ptr),
                        nbytes,
                        class_nbytes,
                        pool,
                        std::vector<size_t>(slots, 0),
                        std::vector<uint64_t>((slots + 63) / 64, ~uint64_t{0}),
                        0};
  if (slots % 64 != 0) slab->free_bits.back() = (uint64_t{1} << (slots % 64)) - 1;
  slabs_.emplace(slab->ptr, slab);
  with_free_[class_nbytes].emplace(slab->ptr, slab);
  return slab;
}

size_t SizeClassAllocator::take_slot(Slab& slab) {
  for (size_t w = 0; w < slab.free_bits.size(); ++w) {
    const uint64_t bits = slab.free_bits[w];
    if (bits == 0) continue;
    const auto bit = static_cast<size_t>(std::countr_zero(bits));
    slab.free_bits[w] &= ~(uint64_t{1} << bit);
    return w * 64 + bit;
  }
  throw_internal_error("size_class: a slab on the free list has no free slot",
                       std::source_location::current());
}

Placement SizeClassAllocator::place(const Request& request) {
  const size_t cls = class_size(request.nbytes);
  std::map<char*, Slab*>& candidates = with_free_[cls];
  if (candidates.empty() && new_slab(cls) == nullptr) return Placement::refused(slab_size(cls));
  Slab& slab = *candidates.begin()->second;
  const SplitTally before = tally(slab);
  const size_t slot = take_slot(slab);
  slab.requested[slot] = request.nbytes;
  if (++slab.live == slab.slots()) candidates.erase(slab.ptr);
  return Placement{slab.ptr + slot * cls, cls, slab.pool, &slab, tally(slab) - before};
}

SplitTally SizeClassAllocator::take_back(const Block& block) {
  auto* slab = static_cast<Slab*>(block.record);
  char* ptr = static_cast<char*>(block.ptr);
  const size_t slot = static_cast<size_t>(ptr - slab->ptr) / slab->class_nbytes;
  const size_t requested = slab->requested[slot];
  internal_check(requested != 0, "size_class: free of a slot that is not allocated (double free?)");
  const SplitTally before = tally(*slab);
  slab->requested[slot] = 0;
  slab->free_bits[slot / 64] |= uint64_t{1} << (slot % 64);
  if (slab->live-- == slab->slots()) with_free_[slab->class_nbytes].emplace(slab->ptr, slab);
  return tally(*slab) - before;
}

bool SizeClassAllocator::release_cached() {
  bool released = false;
  for (auto it = slabs_.begin(); it != slabs_.end();) {
    Slab* slab = it->second;
    if (slab->live > 0) {
      ++it;
      continue;
    }
    with_free_[slab->class_nbytes].erase(slab->ptr);
    return_segment(slab->pool, slab->ptr, slab->nbytes);
    it = slabs_.erase(it);
    delete slab;
    released = true;
  }
  return released;
}

size_t SizeClassAllocator::internal_waste_bytes() const {
  const MemoryStats s = stats();
  return static_cast<size_t>(s.allocated_bytes.all().current - s.requested_bytes.all().current);
}

void SizeClassAllocator::describe(std::vector<SegmentSnapshot>& out) const {
  for (const auto& [ptr, slab] : slabs_) {
    SegmentSnapshot s = segment_at(ptr, slab->nbytes, slab->pool);
    for (size_t i = 0; i < slab->slots(); ++i) {
      const size_t requested = slab->requested[i];
      s.blocks.push_back({s.address + i * slab->class_nbytes, slab->class_nbytes, requested,
                          requested != 0, false});
    }
    out.push_back(std::move(s));
  }
}

}  // namespace memgrad
