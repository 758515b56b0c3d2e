// A policy written in one file, outside the library: exact_fit, and the checks every policy
// passes.
//
// exact_fit gives every request, rounded up to 512 bytes, a segment of exactly that size, so a
// segment holds one block: nothing is ever split and inactive_split stays 0. A freed segment is
// cached and serves a later request of the same rounded size; release_cached returns every
// cached segment to the source (at empty_cache, and when the source refuses a request, before
// the one retry). It is the smallest policy that caches. Everything else (the lock, the stats,
// the memory fraction, the retry, the OOM error, the trace, the 1 EiB guard) is the frame's,
// PolicyAllocator, and the model-based randomized test the built-in policies run checks it
// unchanged (docs/allocator-lab.md, "Write your own policy in one file").
#include <doctest/doctest.h>

#include <map>

#include "allocator/bounded_memory.h"
#include "allocator/error.h"
#include "allocator/policy_allocator.h"
#include "allocator/sizes.h"
#include "tests/lab/random_model.h"
#include "tests/support/allocator_invariants.h"

namespace {

using namespace memgrad;

class ExactFitAllocator final : public PolicyAllocator {
 public:
  explicit ExactFitAllocator(MemorySource& source, const AllocatorConfig& config = {})
      : PolicyAllocator(source, config.memory_fraction) {}
  std::string_view policy_name() const override { return "exact_fit"; }

 protected:
  // A cached segment of the rounded size, or a new one.
  Placement place(const Request& request) override {
    const size_t size = round_up(request.nbytes, kMinBlockSize);
    void* ptr = nullptr;
    if (auto hit = cached_.find(size); hit != cached_.end()) {
      ptr = hit->second;
      cached_.erase(hit);
    } else if ((ptr = obtain_segment(pool_of_segment(size), size, request.stream)) == nullptr) {
      return Placement::refused(size);
    }
    live_[ptr] = request.nbytes;
    return Placement{ptr, size, pool_of_segment(size)};
  }

  // The segment is cached whole: one block per segment, so nothing was split.
  SplitTally take_back(const Block& block) override {
    internal_check(live_.erase(block.ptr) == 1, "exact_fit: free of a block it does not hold");
    cached_.emplace(block.nbytes, block.ptr);
    return {};
  }

  // Every cached segment goes back to the source.
  bool release_cached() override {
    for (const auto& [nbytes, ptr] : cached_) return_segment(pool_of_segment(nbytes), ptr, nbytes);
    const bool released = !cached_.empty();
    cached_.clear();
    return released;
  }

  // One segment per block, live or cached.
  void describe(std::vector<SegmentSnapshot>& out) const override {
    for (const auto& [ptr, requested] : live_) add(out, ptr, round_up(requested, 512), requested);
    for (const auto& [nbytes, ptr] : cached_) add(out, ptr, nbytes, 0);
  }

 private:
  void add(std::vector<SegmentSnapshot>& out, void* ptr, size_t nbytes, size_t requested) const {
    SegmentSnapshot s = segment_at(ptr, nbytes, pool_of_segment(nbytes));
    s.blocks.push_back({s.address, nbytes, requested, requested > 0, false});
    out.push_back(std::move(s));
  }

  std::map<void*, size_t> live_;         // allocated blocks: start -> the caller's bytes
  std::multimap<size_t, void*> cached_;  // free segments, by size
};

}  // namespace

TEST_SUITE("lab") {

TEST_CASE("a policy written in one file passes the randomized model test of the built-in ones") {
  BoundedMemory memory(memgrad::testing::kRandomModelCapacity, "sim:0");
  ExactFitAllocator alloc(memory);
  memgrad::testing::check_random_model(alloc, memory);
}

TEST_CASE("a policy written in one file gets the stats, the fraction and the OOM error") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  ExactFitAllocator alloc(memory, AllocatorConfig::parse("per_process_memory_fraction:0.5"));
  const Block a = alloc.allocate(1000);
  CHECK_EQ(a.nbytes, 1024);
  CHECK_EQ(alloc.memory_allocated(), 1024);
  alloc.free(a);
  CHECK_EQ(alloc.memory_allocated(), 0);
  CHECK_EQ(alloc.memory_reserved(), 1024);  // cached
  const Block b = alloc.allocate(1024);     // the same segment again
  CHECK_EQ(b.ptr, a.ptr);
  CHECK_EQ(alloc.stats().num_device_alloc, 1);
  CHECK_THROWS_AS(alloc.allocate(33 * kMiB), OutOfMemoryError);  // over 0.5 x 64 MiB
  CHECK_EQ(alloc.stats().num_ooms, 1);
  CHECK_EQ(memgrad::testing::check_allocator(alloc), "");
  alloc.free(b);
  alloc.empty_cache();
  CHECK_EQ(alloc.memory_reserved(), 0);
  CHECK_EQ(memory.bytes_in_use(), 0);
}

}  // TEST_SUITE("lab")
