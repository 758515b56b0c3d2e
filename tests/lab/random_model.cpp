// The randomized model run (random_model.h): the run, the model, and the per-policy rules.
#include "tests/lab/random_model.h"

#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "allocator/caching_allocator.h"
#include "allocator/error.h"
#include "lab/policies/expandable_allocator.h"
#include "lab/policies/planned_allocator.h"
#include "lab/policy_registry.h"
#include "tests/support/allocator_invariants.h"

namespace memgrad::testing {
namespace {

constexpr int kFullCheckEvery = 1000;
constexpr size_t kTargetLive = 64;            // the live count the alloc/free mix drifts towards
constexpr uint64_t kSeed = 0x6d656d67726164;  // "memgrad"

// A request size: 55% tiny (1..4096 B), 35% medium (4 KiB..1 MiB), 10% large (1..40 MiB).
size_t draw_size(std::mt19937_64& rng) {
  const auto pick = [&](size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(rng);
  };
  const size_t kind = pick(0, 99);
  if (kind < 55) return pick(1, 4096);
  if (kind < 90) return pick(4097, kMiB);
  return pick(kMiB + 1, 40 * kMiB);
}

// Drives one allocator through the random sequence and checks it against the model. Every check
// returns a description of what broke (empty when all is well); run() stops at the first one.
class RandomRun {
 public:
  RandomRun(PolicyAllocator& allocator, const BoundedMemory& memory)
      : alloc_(allocator),
        memory_(memory),
        policy_(allocator.policy_name()),
        planned_(dynamic_cast<const PlannedAllocator*>(&allocator)),
        caching_(planned_ != nullptr ? &planned_->fallback()
                                     : dynamic_cast<const CachingAllocator*>(&allocator)),
        entry_(find_policy(policy_)),
        config_(caching_ != nullptr ? caching_->config() : AllocatorConfig{}),
        rng_(kSeed) {}

  // Runs `steps` random steps, then frees the live blocks one by one, checking after each.
  std::string run(int steps) {
    for (int step = 0; step < steps; ++step) {
      std::string problem = one_step();
      if (problem.empty() && (step + 1) % kFullCheckEvery == 0) problem = full_check();
      if (!problem.empty()) return fmt::format("step {}: {}", step, problem);
    }
    std::string problem = full_check();
    while (problem.empty() && !live_.empty()) problem = free_one();
    if (problem.empty()) problem = full_check();
    if (!problem.empty()) return fmt::format("while draining: {}", problem);
    return {};
  }

  const RunCounts& counts() const { return counts_; }

 private:
  std::string one_step() {
    const double p_alloc = live_.size() < kTargetLive ? 0.6 : 0.4;
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
    if (u < 0.005) return empty_cache();
    if (live_.empty() || u < p_alloc) return allocate_one();
    return free_one();
  }

  std::string allocate_one() {
    const size_t nbytes = draw_size(rng_);
    const StreamId stream = std::uniform_int_distribution<int>(0, 9)(rng_) == 0 ? 1 : 0;
    const int64_t ooms_before = alloc_.stats().num_ooms;
    Block block;
    try {
      block = alloc_.allocate(nbytes, stream);
    } catch (const OutOfMemoryError& e) {
      ++counts_.ooms;
      return check_oom(e.info(), nbytes, ooms_before);
    }
    ++counts_.allocs;
    std::string problem = add_to_model(block, nbytes, stream);
    return problem.empty() ? cheap_check() : problem;
  }

  std::string free_one() {
    const size_t i = std::uniform_int_distribution<size_t>(0, live_.size() - 1)(rng_);
    const Block block = live_[i];
    live_[i] = live_.back();
    live_.pop_back();
    by_address_.erase(address(block));
    allocated_ -= static_cast<int64_t>(block.nbytes);
    requested_ -= static_cast<int64_t>(block.requested);
    alloc_.free(block);
    ++counts_.frees;
    return cheap_check();
  }

  std::string empty_cache() {
    alloc_.empty_cache();
    ++counts_.empty_caches;
    std::string problem = cheap_check();
    return problem.empty() ? check_released_cache() : problem;
  }

  uint64_t address(const Block& b) const {
    return reinterpret_cast<uintptr_t>(b.ptr) - memory_.address_base();
  }

  // The block is new to the model: check its size rule and that it overlaps no live block.
  std::string add_to_model(const Block& block, size_t nbytes, StreamId stream) {
    const uint64_t at = address(block);
    if (block.requested != nbytes || block.stream != stream) {
      return fmt::format("block for {} B on stream {} says requested {} on stream {}", nbytes,
                         stream, block.requested, block.stream);
    }
    if (at % BoundedMemory::kGranularity != 0) return fmt::format("block at {} is misaligned", at);
    std::string problem = check_block_size(block.nbytes, nbytes);
    if (!problem.empty()) return problem;
    auto next = by_address_.lower_bound(at);
    if (next != by_address_.end() && at + block.nbytes > next->first) {
      return fmt::format("new block [{}, +{}) overlaps live block at {}", at, block.nbytes,
                         next->first);
    }
    if (next != by_address_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second > at) {
        return fmt::format("new block at {} overlaps live block [{}, +{})", at, prev->first,
                           prev->second);
      }
    }
    by_address_.emplace(at, block.nbytes);
    live_.push_back(block);
    allocated_ += static_cast<int64_t>(block.nbytes);
    requested_ += static_cast<int64_t>(nbytes);
    return {};
  }

  // The block a request must get: the range of the policy's entry in the policy table
  // (lab/policy_registry.h) under its configuration; a policy outside the table must round to
  // 512 bytes exactly.
  BlockRange expected_block(size_t nbytes) const {
    if (entry_ != nullptr) return entry_->block_for(nbytes, config_);
    const size_t rounded = (nbytes + 511) / 512 * 512;
    return {rounded, rounded};
  }

  std::string check_block_size(size_t nbytes_block, size_t nbytes) const {
    const BlockRange range = expected_block(nbytes);
    if (nbytes_block < range.min || nbytes_block > range.max) {
      return fmt::format("a request of {} B got a block of {} B (allowed: {} to {})", nbytes,
                         nbytes_block, range.min, range.max);
    }
    return {};
  }

  // The stats agree with the model and the source holds exactly the reserved bytes.
  std::string cheap_check() const {
    const MemoryStats s = alloc_.stats();
    const int64_t reserved = s.reserved_bytes.all().current;
    const int64_t allocated = s.allocated_bytes.all().current;
    const auto live = static_cast<int64_t>(live_.size());
    if (allocated != allocated_ || s.requested_bytes.all().current != requested_ ||
        s.allocation.all().current != live) {
      return fmt::format(
          "stats say {} allocated / {} requested bytes in {} blocks, the model "
          "{} / {} in {}",
          allocated, s.requested_bytes.all().current, s.allocation.all().current, allocated_,
          requested_, live);
    }
    if (s.active_bytes.all().current != allocated || s.active.all().current != live) {
      return fmt::format("active {} bytes in {} blocks, allocated {} in {}",
                         s.active_bytes.all().current, s.active.all().current, allocated, live);
    }
    if (static_cast<int64_t>(memory_.bytes_in_use()) != reserved) {
      return fmt::format("the source holds {} bytes, the allocator reserved {}",
                         memory_.bytes_in_use(), reserved);
    }
    if (reserved < allocated || static_cast<size_t>(reserved) > kRandomModelCapacity) {
      return fmt::format("reserved {} is outside [allocated {}, capacity {}]", reserved, allocated,
                         kRandomModelCapacity);
    }
    if (policy_ == "passthrough" && (reserved != allocated || s.segment.all().current != live)) {
      return fmt::format("passthrough: reserved {} != allocated {} or {} segments for {} blocks",
                         reserved, allocated, s.segment.all().current, live);
    }
    return {};
  }

  // After an OOM nothing changed but the OOM count, the request really did not fit, and the error
  // carries the numbers of the moment.
  std::string check_oom(const OutOfMemoryInfo& info, size_t nbytes, int64_t ooms_before) const {
    std::string problem = cheap_check();
    if (!problem.empty()) return "after an OOM: " + problem;
    const MemoryStats s = alloc_.stats();
    if (s.num_ooms != ooms_before + 1) {
      return fmt::format("num_ooms went from {} to {}", ooms_before, s.num_ooms);
    }
    if (info.requested != nbytes || info.capacity != kRandomModelCapacity ||
        static_cast<int64_t>(info.allocated) != allocated_ ||
        static_cast<int64_t>(info.reserved) != s.reserved_bytes.all().current ||
        info.free != kRandomModelCapacity - memory_.bytes_in_use()) {
      return fmt::format(
          "OOM info (requested {}, capacity {}, allocated {}, reserved {}, free {}) "
          "disagrees with the request {} and the stats",
          info.requested, info.capacity, info.allocated, info.reserved, info.free, nbytes);
    }
    if (info.reserved + info.alloc_size <= info.allowed) {
      return fmt::format("OOM for a {} B segment although reserved {} + segment fits in {}",
                         info.alloc_size, info.reserved, info.allowed);
    }
    return check_released_cache();
  }

  // After empty_cache or an OOM (which empties the cache before giving up) the only cached bytes
  // left are free blocks inside segments in use: reserved - allocated == inactive_split_bytes.
  // Expandable and stitch: no free block holds a whole page (it would have been unmapped), so
  // each is shorter than two pages.
  std::string check_released_cache() const {
    if (policy_ == "expandable" || policy_ == "stitch") {
      for (const SegmentSnapshot& seg : alloc_.snapshot()) {
        const size_t page =
            dynamic_cast<const ExpandableAllocator&>(alloc_).page_size(seg.small_pool);
        for (const BlockSnapshot& b : seg.blocks) {
          if (!b.allocated && b.nbytes >= 2 * page) {
            return fmt::format("a free block of {} B at {} survived the release of free pages",
                               b.nbytes, b.address);
          }
        }
      }
      return {};
    }
    const MemoryStats s = alloc_.stats();
    const int64_t cached = s.reserved_bytes.all().current - s.allocated_bytes.all().current;
    if (cached != s.inactive_split_bytes.all().current) {
      return fmt::format("{} cached bytes after releasing the cache, but {} inactive split bytes",
                         cached, s.inactive_split_bytes.all().current);
    }
    return {};
  }

  // The whole snapshot: layout, sums against the stats, allocated blocks against the model, and
  // for the caching policy the segment sizes and pools.
  std::string full_check() {
    ++counts_.full_checks;
    SnapshotTotals totals;
    std::string problem = check_allocator(alloc_, &totals);
    if (!problem.empty()) return problem;
    const std::vector<SegmentSnapshot> segments = alloc_.snapshot();
    auto model = by_address_.begin();
    for (const SegmentSnapshot& seg : segments) {
      problem = check_segment_rules(seg);
      if (!problem.empty()) return problem;
      for (const BlockSnapshot& b : seg.blocks) {
        if (!b.allocated) continue;
        if (model == by_address_.end() || model->first != b.address || model->second != b.nbytes) {
          return fmt::format("snapshot block [{}, +{}) is not the model's next live block",
                             b.address, b.nbytes);
        }
        ++model;
      }
    }
    if (model != by_address_.end()) {
      return fmt::format("live block at {} is missing from the snapshot", model->first);
    }
    return check_fragmentation();
  }

  // hard + soft + stream = reserved - allocated exactly, and rounding = allocated - requested,
  // against the stats (the model allocates on several streams: their cache counts as stream).
  std::string check_fragmentation() const {
    const FragmentationReport f = alloc_.fragmentation();
    const MemoryStats s = alloc_.stats();
    const auto reserved = static_cast<size_t>(s.reserved_bytes.all().current);
    const auto allocated = static_cast<size_t>(s.allocated_bytes.all().current);
    const auto requested = static_cast<size_t>(s.requested_bytes.all().current);
    if (f.reserved != reserved || f.allocated != allocated) {
      return fmt::format("fragmentation report: reserved {} allocated {}, stats {} and {}",
                         f.reserved, f.allocated, reserved, allocated);
    }
    if (f.hard + f.soft + f.stream != reserved - allocated) {
      return fmt::format("fragmentation: hard {} + soft {} + stream {} != reserved - allocated {}",
                         f.hard, f.soft, f.stream, reserved - allocated);
    }
    if (f.rounding != allocated - requested) {
      return fmt::format("fragmentation: rounding {} != allocated - requested {}", f.rounding,
                         allocated - requested);
    }
    if (f.largest_request < f.largest_free_block) {
      return fmt::format("fragmentation: largest request {} below the largest free block {}",
                         f.largest_request, f.largest_free_block);
    }
    return {};
  }

  // The shape of a policy's segments. Caching: small segments are 2 MiB and hold blocks of at most
  // 1 MiB; large segments are 20 MiB or a multiple of 2 MiB of at least 10 MiB, and hold blocks
  // above 1 MiB (first_fit obtains the same sizes but places blocks in any segment).
  // Passthrough: one allocated block per segment. Buddy: power-of-two arenas and blocks, each at
  // an offset that is a multiple of its size. size_class: one class per slab. Expandable and
  // stitch: whole pages of its pool. Planned: its arena has the plan's size, a request served
  // before the plan has a segment of its own, its other segments are caching's.
  std::string check_segment_rules(const SegmentSnapshot& seg) const {
    if (planned_ != nullptr && planned_->is_arena(seg.address)) return {};
    if (planned_ != nullptr && planned_->is_exact(seg.address)) {
      if (seg.blocks.size() != 1 || !seg.blocks[0].allocated) {
        return fmt::format("planned's exact segment at {} is not one allocated block", seg.address);
      }
      return {};
    }
    if (policy_ == "passthrough") {
      if (seg.blocks.size() != 1 || !seg.blocks[0].allocated) {
        return fmt::format("passthrough segment at {} is not one allocated block", seg.address);
      }
      return {};
    }
    if (caching_ != nullptr || policy_ == "first_fit") return check_caching_segment(seg);
    if (policy_ == "buddy") return check_buddy_segment(seg);
    if (policy_ == "size_class") {
      for (const BlockSnapshot& b : seg.blocks) {
        if (b.nbytes != seg.blocks[0].nbytes) {
          return fmt::format("slab at {} holds blocks of {} and {} B", seg.address,
                             seg.blocks[0].nbytes, b.nbytes);
        }
      }
    }
    if (policy_ == "expandable" || policy_ == "stitch") {
      const size_t page =
          dynamic_cast<const ExpandableAllocator&>(alloc_).page_size(seg.small_pool);
      if (seg.nbytes % page != 0) {
        return fmt::format("expandable segment at {} of {} B is not whole pages", seg.address,
                           seg.nbytes);
      }
    }
    return {};
  }

  std::string check_caching_segment(const SegmentSnapshot& seg) const {
    const bool size_ok = seg.small_pool
                             ? seg.nbytes == kSmallBuffer
                             : seg.nbytes == kLargeBuffer ||
                                   (seg.nbytes % kRoundLarge == 0 && seg.nbytes >= kMinLargeAlloc);
    if (!size_ok) {
      return fmt::format("{} segment at {} has {} bytes", seg.small_pool ? "small" : "large",
                         seg.address, seg.nbytes);
    }
    if (caching_ == nullptr) return {};
    for (const BlockSnapshot& b : seg.blocks) {
      if (b.allocated && (b.nbytes <= kSmallSize) != seg.small_pool) {
        return fmt::format("block of {} bytes allocated in a {} segment", b.nbytes,
                           seg.small_pool ? "small" : "large");
      }
    }
    return {};
  }

  static std::string check_buddy_segment(const SegmentSnapshot& seg) {
    if (!std::has_single_bit(seg.nbytes)) {
      return fmt::format("buddy arena at {} has {} B, not a power of two", seg.address, seg.nbytes);
    }
    for (const BlockSnapshot& b : seg.blocks) {
      if (!std::has_single_bit(b.nbytes) || (b.address - seg.address) % b.nbytes != 0) {
        return fmt::format(
            "buddy block of {} B at offset {} is not a power of two at a multiple "
            "of its size",
            b.nbytes, b.address - seg.address);
      }
    }
    return {};
  }

  PolicyAllocator& alloc_;
  const BoundedMemory& memory_;
  std::string policy_;
  const PlannedAllocator* planned_;  // null for every other policy
  const CachingAllocator* caching_;  // caching, or planned's fallback; null for the others
  const PolicyEntry* entry_;         // the policy's entry in the table (null outside it)
  AllocatorConfig config_;           // the options its rounding follows (caching's)
  std::mt19937_64 rng_;
  std::vector<Block> live_;
  std::map<uint64_t, size_t> by_address_;  // live blocks: address -> nbytes
  int64_t allocated_ = 0;
  int64_t requested_ = 0;
  RunCounts counts_;
};

// After the drain: nothing allocated, totals balanced; then empty_cache returns everything.
void check_released(PolicyAllocator& alloc, const BoundedMemory& memory) {
  MemoryStats s = alloc.stats();
  CHECK_EQ(s.allocation.all().current, 0);
  CHECK_EQ(s.allocated_bytes.all().current, 0);
  CHECK_EQ(s.requested_bytes.all().current, 0);
  CHECK_EQ(s.active_bytes.all().current, 0);
  CHECK_EQ(s.inactive_split_bytes.all().current, 0);
  CHECK_EQ(s.allocated_bytes.all().allocated, s.allocated_bytes.all().freed);
  CHECK_EQ(s.allocation.all().allocated, s.allocation.all().freed);
  alloc.empty_cache();
  s = alloc.stats();
  CHECK_EQ(s.reserved_bytes.all().current, 0);
  CHECK_EQ(s.segment.all().current, 0);
  CHECK_EQ(s.reserved_bytes.all().allocated, s.reserved_bytes.all().freed);
  CHECK_EQ(s.num_device_alloc, s.num_device_free);
  CHECK_EQ(memory.bytes_in_use(), 0);
  CHECK(alloc.snapshot().empty());
}

}  // namespace

RandomModelResult run_random_model(PolicyAllocator& allocator, const BoundedMemory& memory,
                                   int steps) {
  RandomRun run(allocator, memory);
  RandomModelResult result;
  result.problem = run.run(steps);
  result.counts = run.counts();
  return result;
}

void check_random_model(PolicyAllocator& allocator, const BoundedMemory& memory) {
  const RandomModelResult result = run_random_model(allocator, memory, kRandomModelSteps);
  CHECK_MESSAGE(result.problem.empty(), result.problem);
  const RunCounts& n = result.counts;
  CAPTURE(n.allocs);
  CAPTURE(n.ooms);
  // The sequence must reach the paths it is meant to test: many blocks, OOMs, cache flushes.
  CHECK_GT(n.allocs, kRandomModelSteps / 3);
  CHECK_EQ(n.frees, n.allocs);
  CHECK_GT(n.ooms, 0);
  CHECK_GT(n.empty_caches, 0);
  CHECK_EQ(n.full_checks, kRandomModelSteps / kFullCheckEvery + 2);
  const MemoryStats s = allocator.stats();
  CHECK_EQ(s.num_ooms, n.ooms);
  if (allocator.policy_name() == "passthrough") {
    // Every successful allocation was one source call, and every free one more.
    CHECK_EQ(s.num_device_alloc, n.allocs);
    CHECK_EQ(s.num_device_free, n.frees);
  } else {
    // A cache was released and the request retried at least once.
    CHECK_GT(s.num_alloc_retries, 0);
  }
  check_released(allocator, memory);
}

}  // namespace memgrad::testing
