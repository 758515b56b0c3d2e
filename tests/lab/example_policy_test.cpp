// A policy written in one file, outside allocator/: exact_fit, and the checks every policy passes.
//
// exact_fit gives every request, rounded up to 512 bytes, a segment of exactly that size, so a
// segment holds one block: nothing is ever split and inactive_split stays 0. A freed segment is
// cached and serves a later request of the same rounded size; empty_cache returns every cached
// segment to the source, and so does a request the source refuses, once, before the
// OutOfMemoryError. It is the smallest policy that caches. Everything else (the lock, the stats,
// the memory fraction, the OOM error, the trace, the 1 EiB guard) comes from PolicyAllocator,
// and the model-based randomized test the built-in policies run checks it unchanged
// (docs/allocator-lab.md, "Write your own policy in one file").
#include <doctest/doctest.h>

#include <map>
#include <mutex>

#include "allocator/bounded_memory.h"
#include "allocator/caching_allocator.h"
#include "allocator/error.h"
#include "allocator/policy_allocator.h"
#include "tests/support/allocator_invariants.h"
#include "tests/lab/random_model.h"

namespace {

using namespace memgrad;

class ExactFitAllocator final : public PolicyAllocator {
 public:
  // Uses `config.memory_fraction`. Throws ConfigError.
  explicit ExactFitAllocator(MemorySource& source, const AllocatorConfig& config = {})
      : PolicyAllocator(source, config.memory_fraction) {}
  ~ExactFitAllocator() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [ptr, seg] : segments_) source_.free(ptr, seg.nbytes);
  }

  // Caches the block's segment for a request of the same rounded size.
  void free(const Block& block) override {
    if (block.ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    Segment& seg = segments_.at(block.ptr);
    internal_check(seg.requested > 0, "exact_fit: free of a block that is not allocated");
    count_free(pool_of_segment(seg.nbytes), seg.nbytes, seg.requested);
    trace_event(TraceAction::FreeRequested, block.ptr, seg.nbytes, seg.requested, block.stream);
    trace_event(TraceAction::FreeCompleted, block.ptr, seg.nbytes, seg.requested, block.stream);
    seg.requested = 0;
    cached_.emplace(seg.nbytes, block.ptr);
  }

  // Returns every cached segment to the source.
  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return_cached();
  }

  // One segment per block, by address.
  std::vector<SegmentSnapshot> snapshot() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<SegmentSnapshot> out;
    for (const auto& [ptr, seg] : segments_) {
      const uint64_t address = trace_address(ptr);
      SegmentSnapshot s{address, seg.nbytes, kDefaultStream,
                        pool_of_segment(seg.nbytes) == StatPool::SmallPool, false, {}};
      s.blocks.push_back({address, seg.nbytes, seg.requested, seg.requested > 0, false});
      out.push_back(std::move(s));
    }
    return out;
  }

  std::string_view policy_name() const override { return "exact_fit"; }

 protected:
  // Allocates: nbytes rounded up to 512, a cached segment of that size or a new one.
  Block allocate_block(size_t nbytes, StreamId stream) override {
    const size_t size = round_up(nbytes, kMinBlockSize);
    const StatPool pool = pool_of_segment(size);
    std::lock_guard<std::mutex> lock(mutex_);
    void* ptr = nullptr;
    if (auto hit = cached_.find(size); hit != cached_.end()) {
      ptr = hit->second;
      cached_.erase(hit);
    } else {
      ptr = obtain_segment(pool, size, stream);
      if (ptr == nullptr && !cached_.empty()) {
        return_cached();  // segments of other sizes may make room
        ++stats_.num_alloc_retries;
        ptr = obtain_segment(pool, size, stream);
      }
      if (ptr == nullptr) throw_oom(nbytes, size, stream);
      segments_[ptr].nbytes = size;
    }
    segments_[ptr].requested = nbytes;
    count_alloc(pool, size, nbytes);
    trace_event(TraceAction::Alloc, ptr, size, nbytes, stream);
    return Block{ptr, size, nbytes, stream, nullptr};
  }

 private:
  struct Segment {
    size_t nbytes = 0;     // the segment is the block: 512-byte multiple
    size_t requested = 0;  // 0 while cached
  };

  // Requires mutex_.
  void return_cached() {
    for (const auto& [nbytes, ptr] : cached_) {
      return_segment(pool_of_segment(nbytes), ptr, nbytes);
      segments_.erase(ptr);
    }
    cached_.clear();
  }

  std::map<void*, Segment> segments_;    // every segment, by address
  std::multimap<size_t, void*> cached_;  // the free ones, by size
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

}  // TEST_SUITE
