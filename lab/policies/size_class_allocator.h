// The size-class policy: segregated size classes served from slabs, never split, never merged.
//
// A request is rounded up to its class: multiples of 512 bytes up to 4 KiB, then four classes per
// power of two (5, 6, 7, 8 KiB; 10, 12, 14, 16 KiB; ...), so a block wastes less than a fifth
// of itself. Each class has its own slabs: a slab is one segment holding as many slots of the
// class as fit in 2 MiB (one slot for classes above 2 MiB), so slabs have no tail. A free slot
// is reused only by a request of the same class, lowest address first; blocks are never split or
// merged. The waste therefore has two parts, both visible in the stats: inside each block
// (internal: allocated_bytes - requested_bytes, also internal_waste_bytes()) and free slots of
// one class that another class cannot use (reserved - allocated). Slabs with no allocated slot
// are returned by empty_cache(), and before an OutOfMemoryError.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "allocator/config.h"
#include "allocator/policy_allocator.h"

namespace memgrad {

class SizeClassAllocator final : public PolicyAllocator {
 public:
  // Uses `config.memory_fraction`; the caching-only options are ignored. Throws ConfigError.
  explicit SizeClassAllocator(MemorySource& source, const AllocatorConfig& config = {});
  ~SizeClassAllocator() override;

  std::string_view policy_name() const override { return "size_class"; }

  // Bytes inside allocated blocks that nobody asked for (allocated - requested).
  size_t internal_waste_bytes() const;

  // The class of a request of `nbytes` bytes (> 0).
  static size_t class_size(size_t nbytes);
  // The bytes of a slab of class `class_nbytes`.
  static size_t slab_size(size_t class_nbytes);

  static constexpr size_t kSlabTarget = 2 * kMiB;  // slab size for classes up to 2 MiB, bytes

 protected:
  // Allocates: class_size(nbytes) (Block::nbytes), the lowest free slot of the lowest slab of
  // that class with one; a new slab when none has.
  Placement place(const Request& request) override;
  // Frees the slot.
  SplitTally take_back(const Block& block) override;
  // Returns every slab with no allocated slot to the source; whether there was one.
  bool release_cached() override;
  // One segment per slab, tiled by its slots (free slots are not merged).
  void describe(std::vector<SegmentSnapshot>& out) const override;

 private:
  struct Slab {
    char* ptr = nullptr;
    size_t nbytes = 0;
    size_t class_nbytes = 0;
    StatPool pool = StatPool::SmallPool;
    std::vector<size_t> requested;    // per slot: the caller's bytes; 0 = free
    std::vector<uint64_t> free_bits;  // bit i set <=> slot i is free
    size_t live = 0;
    size_t slots() const { return requested.size(); }
  };

  Slab* new_slab(size_t class_nbytes);
  static size_t take_slot(Slab& slab);  // the lowest free slot, marked allocated
  static SplitTally tally(const Slab& slab);

  std::map<size_t, std::map<char*, Slab*>> with_free_;  // class -> slabs with a free slot
  std::map<char*, Slab*> slabs_;                        // every slab, by address
};

}  // namespace memgrad
