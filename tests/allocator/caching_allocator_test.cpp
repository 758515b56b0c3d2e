// The caching policy's rules, each as exact byte relations on a simulated device.
// Expected numbers follow PyTorch's constants: 512-byte rounding, 2 MiB small segments, 20 MiB
// large segments below 10 MiB, 2 MiB-rounded segments above.
#include <doctest/doctest.h>

#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "allocator/bounded_memory.h"
#include "allocator/caching_allocator.h"
#include "allocator/error.h"
#include "tests/support/manual_events.h"
#include "tests/support/stats_delta.h"

using namespace memgrad;
using memgrad::testing::ManualEvents;
using memgrad::testing::StatsDelta;

namespace {

constexpr int64_t MiB = 1024 * 1024;

struct Device {
  explicit Device(size_t capacity = 1024 * kMiB, AllocatorConfig config = {})
      : memory(capacity, "sim:0"), alloc(memory, config) {}
  BoundedMemory memory;
  CachingAllocator alloc;
};

uint64_t offset(const Device& d, const Block& b) {
  return reinterpret_cast<uintptr_t>(b.ptr) - d.memory.address_base();
}

}  // namespace

TEST_SUITE("allocator") {

TEST_CASE("requests are rounded up to multiples of 512 bytes") {
  Device d;
  CHECK_EQ(d.alloc.round_size(1), 512);
  CHECK_EQ(d.alloc.round_size(512), 512);
  CHECK_EQ(d.alloc.round_size(513), 1024);
  CHECK_EQ(d.alloc.round_size(4000), 4096);
  CHECK_EQ(d.alloc.round_size(1 * MiB), 1 * MiB);
  Block b = d.alloc.allocate(4000);
  CHECK_EQ(b.nbytes, 4096);
  CHECK_EQ(b.requested, 4000);
  MemoryStats s = d.alloc.stats();
  CHECK_EQ(s.allocated_bytes.all().current, 4096);
  CHECK_EQ(s.requested_bytes.all().current, 4000);
  d.alloc.free(b);
}

TEST_CASE("segment sizes follow the pool rules") {
  // (request, expected segment, expected block after the split rules)
  struct Case {
    size_t request;
    int64_t segment;
    int64_t block;
    bool small;
  };
  const Case cases[] = {
      {4000, 2 * MiB, 4096, true},
      {1 * MiB, 2 * MiB, 1 * MiB, true},
      {1 * MiB + 1, 20 * MiB, 1 * MiB + 512, false},
      {5 * MiB, 20 * MiB, 5 * MiB, false},
      // 25,000,000 rounds to 25,000,448; the 24 MiB segment leaves 165,376 bytes, below the
      // large pool's 1 MiB split threshold, so the whole segment is handed out.
      {25000000, 24 * MiB, 24 * MiB, false},
      {30 * MiB, 30 * MiB, 30 * MiB, false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.request);
    Device d;
    Block b = d.alloc.allocate(c.request);
    MemoryStats s = d.alloc.stats();
    CHECK_EQ(s.reserved_bytes.all().current, c.segment);
    CHECK_EQ(b.nbytes, c.block);
    CHECK_EQ(s.allocated_bytes.all().current, c.block);
    CHECK_EQ(s.requested_bytes.all().current, static_cast<int64_t>(c.request));
    CHECK_EQ(s.segment.small_pool().current, c.small ? 1 : 0);
    CHECK_EQ(s.segment.large_pool().current, c.small ? 0 : 1);
    d.alloc.free(b);
  }
}

TEST_CASE("a split leaves the rest of the segment as an inactive split block") {
  Device d;
  Block b = d.alloc.allocate(4000);
  MemoryStats s = d.alloc.stats();
  CHECK_EQ(s.inactive_split.all().current, 1);
  CHECK_EQ(s.inactive_split_bytes.all().current, 2 * MiB - 4096);
  d.alloc.free(b);
  s = d.alloc.stats();
  // Freed: it merges with the rest and the segment is whole again.
  CHECK_EQ(s.inactive_split.all().current, 0);
  CHECK_EQ(s.inactive_split_bytes.all().current, 0);
  CHECK_EQ(d.alloc.snapshot().at(0).blocks.size(), 1);
}

TEST_CASE("the large pool splits only when more than 1 MiB would remain") {
  Device d;
  // 19 MiB + 512 from a 20 MiB segment leaves 1 MiB - 512: not split.
  Block a = d.alloc.allocate(19 * MiB + 1);
  CHECK_EQ(a.nbytes, 20 * MiB);
  CHECK_EQ(d.alloc.stats().inactive_split.all().current, 0);
  // 18 MiB leaves exactly 2 MiB: split.
  Block b = d.alloc.allocate(8 * MiB);  // a second 20 MiB segment
  CHECK_EQ(b.nbytes, 8 * MiB);
  CHECK_EQ(d.alloc.stats().inactive_split_bytes.all().current, 12 * MiB);
  d.alloc.free(a);
  d.alloc.free(b);
}

TEST_CASE("freeing lowers allocated but not reserved, and the block is reused") {
  Device d;
  Block a = d.alloc.allocate(1000);
  void* first = a.ptr;
  StatsDelta delta(d.alloc);
  d.alloc.free(a);
  CHECK_EQ(delta.allocated(), -1024);
  CHECK_EQ(delta.reserved(), 0);
  Block b = d.alloc.allocate(1000);
  CHECK_EQ(b.ptr, first);              // the cached block again
  CHECK_EQ(delta.source_allocs(), 0);  // no new segment
  CHECK_EQ(delta.allocated(), 0);
  d.alloc.free(b);
}

TEST_CASE("a zero-byte request returns an empty block and changes nothing") {
  Device d;
  StatsDelta delta(d.alloc);
  Block b = d.alloc.allocate(0);
  CHECK_EQ(b.ptr, nullptr);
  CHECK_EQ(b.nbytes, 0);
  CHECK_EQ(delta.allocations(), 0);
  CHECK_EQ(delta.reserved(), 0);
  d.alloc.free(b);
}

TEST_CASE("free neighbours coalesce back into one block") {
  Device d;
  Block a = d.alloc.allocate(512);
  Block b = d.alloc.allocate(512);
  Block c = d.alloc.allocate(512);
  CHECK_EQ(offset(d, b), offset(d, a) + 512);
  CHECK_EQ(offset(d, c), offset(d, b) + 512);
  d.alloc.free(a);
  d.alloc.free(c);  // c merges with the free tail of the segment
  std::vector<SegmentSnapshot> snap = d.alloc.snapshot();
  REQUIRE_EQ(snap.size(), 1);
  CHECK_EQ(snap[0].blocks.size(), 3);  // [a free][b live][c + tail free]
  CHECK_EQ(d.alloc.stats().inactive_split.all().current, 2);
  d.alloc.free(b);
  snap = d.alloc.snapshot();
  CHECK_EQ(snap[0].blocks.size(), 1);
  CHECK_EQ(snap[0].blocks[0].nbytes, 2 * MiB);
  CHECK_EQ(d.alloc.stats().inactive_split.all().current, 0);
}

TEST_CASE("best fit picks the smallest free block that fits, lowest address first") {
  Device d;
  // Carve one segment into [A 4K][x][B 8K][y][C 4K][z][rest] and free A, B and C.
  Block a = d.alloc.allocate(4096);
  Block x = d.alloc.allocate(512);
  Block b = d.alloc.allocate(8192);
  Block y = d.alloc.allocate(512);
  Block c = d.alloc.allocate(4096);
  Block z = d.alloc.allocate(512);
  const uint64_t a_at = offset(d, a), b_at = offset(d, b);
  d.alloc.free(c);
  d.alloc.free(b);
  d.alloc.free(a);
  Block p = d.alloc.allocate(3000);  // 3072: the 4K blocks fit best; A has the lower address
  CHECK_EQ(offset(d, p), a_at);
  Block q = d.alloc.allocate(6000);  // 6144: only B (8K) or the tail fit; B is smaller
  CHECK_EQ(offset(d, q), b_at);
  for (const Block& blk : {x, y, z, p, q}) d.alloc.free(blk);
}

TEST_CASE("empty_cache releases only segments with nothing allocated") {
  Device d;
  Block small = d.alloc.allocate(4096);     // 2 MiB segment, stays live
  Block large = d.alloc.allocate(5 * MiB);  // 20 MiB segment, freed below
  Block big = d.alloc.allocate(30 * MiB);   // 30 MiB segment, freed below
  d.alloc.free(large);
  d.alloc.free(big);
  CHECK_EQ(d.alloc.memory_reserved(), 52 * MiB);
  StatsDelta delta(d.alloc);
  d.alloc.empty_cache();
  CHECK_EQ(delta.reserved(), -50 * MiB);
  CHECK_EQ(delta.allocated(), 0);
  CHECK_EQ(d.alloc.memory_reserved(), 2 * MiB);
  CHECK_EQ(d.memory.bytes_in_use(), 2 * MiB);
  d.alloc.free(small);
  d.alloc.empty_cache();
  CHECK_EQ(d.alloc.memory_reserved(), 0);
  CHECK_EQ(d.memory.bytes_in_use(), 0);
}

TEST_CASE("seed makes a segment to order: its blocks handed out or cached, counted as allocated") {
  // A 20 MiB large segment as a recording ended it: 2 MiB allocated, 3 MiB free, 15 MiB
  // allocated; then a 2 MiB small one, wholly free.
  Device d;
  const std::optional<std::vector<Block>> large = d.alloc.seed(
      {20 * kMiB,
       kDefaultStream,
       false,
       {{2 * kMiB, 2000000, true}, {3 * kMiB, 0, false}, {15 * kMiB, 15 * kMiB, true}}});
  REQUIRE(large.has_value());
  REQUIRE_EQ(large->size(), 2);
  CHECK_EQ(offset(d, (*large)[0]), 0);
  CHECK_EQ((*large)[0].nbytes, 2 * MiB);
  CHECK_EQ((*large)[0].requested, 2000000);
  CHECK_EQ(offset(d, (*large)[1]), 5 * MiB);
  const std::optional<std::vector<Block>> small =
      d.alloc.seed({2 * kMiB, kDefaultStream, true, {{2 * kMiB, 0, false}}});
  REQUIRE(small.has_value());
  CHECK(small->empty());
  const MemoryStats s = d.alloc.stats();
  CHECK_EQ(s.reserved_bytes.all().current, 22 * MiB);
  CHECK_EQ(s.segment.all().current, 2);
  CHECK_EQ(s.allocated_bytes.all().current, 17 * MiB);
  CHECK_EQ(s.requested_bytes.all().current, 2000000 + 15 * MiB);
  CHECK_EQ(s.allocation.all().current, 2);
  CHECK_EQ(s.inactive_split.all().current, 1);  // the 3 MiB gap; the whole small one is no split
  CHECK_EQ(s.inactive_split_bytes.all().current, 3 * MiB);
  const std::vector<SegmentSnapshot> layout = d.alloc.snapshot();
  REQUIRE_EQ(layout.size(), 2);
  REQUIRE_EQ(layout[0].blocks.size(), 3);
  CHECK(!layout[0].small_pool);
  CHECK((layout[0].blocks[0].allocated && !layout[0].blocks[1].allocated &&
         layout[0].blocks[2].allocated));
  CHECK_EQ(layout[0].blocks[1].nbytes, 3 * MiB);
  REQUIRE_EQ(layout[1].blocks.size(), 1);
  CHECK(layout[1].small_pool);
  // A 3 MiB request is served from the gap and a 4 KiB one from the small segment: no new one.
  const Block gap = d.alloc.allocate(3 * MiB);
  CHECK_EQ(offset(d, gap), 2 * MiB);
  const Block tiny = d.alloc.allocate(4096);
  CHECK_EQ(d.alloc.memory_reserved(), 22 * MiB);
  CHECK_EQ(s.num_device_alloc + 0, d.alloc.stats().num_device_alloc);
  // Freed, the blocks merge back into whole segments that empty_cache() returns.
  for (const Block& b : {(*large)[0], (*large)[1], gap, tiny}) d.alloc.free(b);
  CHECK_EQ(d.alloc.stats().inactive_split.all().current, 0);
  d.alloc.empty_cache();
  CHECK_EQ(d.alloc.memory_reserved(), 0);
  CHECK_EQ(d.memory.bytes_in_use(), 0);
}

TEST_CASE("peaks track the high-water mark until reset") {
  Device d;
  Block a = d.alloc.allocate(3 * MiB);
  Block b = d.alloc.allocate(3 * MiB);
  d.alloc.free(a);
  d.alloc.free(b);
  MemoryStats s = d.alloc.stats();
  CHECK_EQ(s.allocated_bytes.all().peak, 6 * MiB);
  CHECK_EQ(s.allocated_bytes.all().current, 0);
  CHECK_EQ(s.allocated_bytes.all().allocated, 6 * MiB);
  CHECK_EQ(s.allocated_bytes.all().freed, 6 * MiB);
  d.alloc.reset_peak_stats();
  CHECK_EQ(d.alloc.stats().allocated_bytes.all().peak, 0);
  CHECK_EQ(d.alloc.stats().reserved_bytes.all().peak, 20 * MiB);
  d.alloc.reset_accumulated_stats();
  CHECK_EQ(d.alloc.stats().allocated_bytes.all().allocated, 0);
}

TEST_CASE("fragmentation: OOM although the cached free bytes exceed the request") {
  // Fifteen 6 MiB tensors fill five 20 MiB segments as [A][B][C][2 MiB tail]. Freeing A and C in
  // each leaves holes of 6 and 8 MiB: 70 MiB cached and free. A 9 MiB request fits in no hole,
  // the 100 MiB device is full, and no segment can be released because each still holds B.
  Device d(100 * kMiB);
  std::vector<Block> blocks;
  for (int i = 0; i < 15; ++i) blocks.push_back(d.alloc.allocate(6 * MiB));
  CHECK_EQ(d.alloc.memory_reserved(), 100 * MiB);
  for (size_t i = 0; i < blocks.size(); i += 3) {
    d.alloc.free(blocks[i]);
    d.alloc.free(blocks[i + 2]);
  }
  OutOfMemoryInfo info;
  try {
    d.alloc.allocate(9 * MiB);
    FAIL("expected OutOfMemoryError");
  } catch (const OutOfMemoryError& e) {
    info = e.info();
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.find("sim:0 out of memory. Tried to allocate 20.00 MiB (a segment for a request "
                    "of 9.00 MiB)") == 0);
    CHECK(what.find("70.00 MiB is reserved by memgrad but unallocated") != std::string::npos);
  }
  CHECK_EQ(info.requested, 9 * MiB);
  CHECK_EQ(info.alloc_size, 20 * MiB);
  CHECK_EQ(info.capacity, 100 * MiB);
  CHECK_EQ(info.free, 0);
  CHECK_EQ(info.allocated, 30 * MiB);
  CHECK_EQ(info.reserved, 100 * MiB);
  MemoryStats s = d.alloc.stats();
  CHECK_EQ(s.num_ooms, 1);
  CHECK_EQ(s.num_alloc_retries, 1);
  CHECK_EQ(s.inactive_split_bytes.all().current, 70 * MiB);
  for (size_t i = 1; i < blocks.size(); i += 3) d.alloc.free(blocks[i]);
  CHECK_EQ(d.alloc.stats().inactive_split_bytes.all().current, 0);
}

TEST_CASE("on a full device the cache is released and the request retried") {
  Device d(40 * kMiB);
  Block a = d.alloc.allocate(5 * MiB);  // a 20 MiB segment
  d.alloc.free(a);                      // cached, unsplit
  StatsDelta delta(d.alloc);
  Block b = d.alloc.allocate(30 * MiB);  // 20 + 30 > 40: free the cache and retry
  CHECK_EQ(d.alloc.stats().num_alloc_retries, 1);
  CHECK_EQ(delta.reserved(), 10 * MiB);  // -20 released, +30 new
  CHECK_EQ(d.alloc.stats().num_ooms, 0);
  d.alloc.free(b);
}

TEST_CASE("max_split_size keeps oversize blocks whole and out of small requests") {
  AllocatorConfig config = AllocatorConfig::parse("max_split_size_mb:40");
  Device d(1024 * kMiB, config);
  Block big = d.alloc.allocate(50 * MiB);
  CHECK_EQ(d.alloc.stats().oversize_allocations.current, 1);
  CHECK_EQ(d.alloc.stats().oversize_segments.current, 1);
  d.alloc.free(big);
  StatsDelta delta(d.alloc);
  // A small request does not carve up the cached 50 MiB block: it gets its own segment.
  Block small = d.alloc.allocate(12 * MiB);
  CHECK_EQ(delta.source_allocs(), 1);
  // A 45 MiB request may use the 50 MiB block (within 20 MiB of rounding), unsplit.
  Block large = d.alloc.allocate(45 * MiB);
  CHECK_EQ(delta.source_allocs(), 1);
  CHECK_EQ(large.nbytes, 50 * MiB);
  d.alloc.free(small);
  d.alloc.free(large);
}

TEST_CASE("roundup_power2_divisions rounds to equal steps between powers of two") {
  Device d(1024 * kMiB, AllocatorConfig::parse("roundup_power2_divisions:4"));
  // [2 MiB, 4 MiB) in 4 steps of 512 KiB: 3 MiB + 1 -> 3.5 MiB.
  CHECK_EQ(d.alloc.round_size(3 * MiB + 1), 3 * MiB + 512 * 1024);
  CHECK_EQ(d.alloc.round_size(4 * MiB), 4 * MiB);  // powers of two are kept
  // At or below 512 x divisions plain 512-byte rounding applies (PyTorch's rule): 1200 -> 1536.
  CHECK_EQ(d.alloc.round_size(1200), 1536);
}

TEST_CASE("a memory fraction caps reserved memory and shows in the OOM message") {
  Device d(100 * kMiB, AllocatorConfig::parse("per_process_memory_fraction:0.5"));
  Block a = d.alloc.allocate(30 * MiB);
  try {
    d.alloc.allocate(30 * MiB);
    FAIL("expected OutOfMemoryError");
  } catch (const OutOfMemoryError& e) {
    CHECK(e.info().fraction_set);
    CHECK_EQ(e.info().allowed, 50 * MiB);
    CHECK(std::string(e.what()).find("50.00 MiB allowed; ") != std::string::npos);
  }
  d.alloc.free(a);
  CHECK_THROWS_AS(d.alloc.set_memory_fraction(1.5), ConfigError);
}

TEST_CASE("freed blocks are reused only on their own stream") {
  Device d;
  Block a = d.alloc.allocate(4096, /*stream=*/1);
  d.alloc.free(a);
  StatsDelta delta(d.alloc);
  Block b = d.alloc.allocate(4096, /*stream=*/0);
  CHECK_EQ(delta.source_allocs(), 1);  // stream 1's cache is not visible to stream 0
  Block c = d.alloc.allocate(4096, /*stream=*/1);
  CHECK_EQ(delta.source_allocs(), 1);
  CHECK_EQ(c.ptr, a.ptr);
  d.alloc.free(b);
  d.alloc.free(c);
}

TEST_CASE("a block used by another stream is reused only after that stream's event") {
  Device d;
  ManualEvents events;
  d.alloc.set_stream_events(&events);
  Block a = d.alloc.allocate(4096);
  d.alloc.record_stream(a, 7);
  d.alloc.free(a);
  MemoryStats s = d.alloc.stats();
  CHECK_EQ(s.allocated_bytes.all().current, 0);  // freed for the caller ...
  CHECK_EQ(s.active_bytes.all().current, 4096);  // ... but still active until the event
  Block b = d.alloc.allocate(4096);
  CHECK_NE(b.ptr, a.ptr);
  events.done[0] = 1;
  d.alloc.free(b);
  Block c = d.alloc.allocate(4096);  // the event completed: a's block merged back and is reused
  CHECK_EQ(c.ptr, a.ptr);
  CHECK_EQ(d.alloc.stats().active_bytes.all().current, 4096);
  d.alloc.free(c);
}

TEST_CASE("garbage collection frees old cached segments above the threshold") {
  Device d(100 * kMiB, AllocatorConfig::parse("garbage_collection_threshold:0.5"));
  d.alloc.set_memory_fraction(1.0);  // GC needs a fraction set, as in PyTorch
  Block a = d.alloc.allocate(30 * MiB);
  Block b = d.alloc.allocate(30 * MiB);
  d.alloc.free(a);
  d.alloc.free(b);
  CHECK_EQ(d.alloc.memory_reserved(), 60 * MiB);
  // A miss with 60 MiB reserved (> 50 MiB threshold) collects aged whole segments first.
  Block c = d.alloc.allocate(40 * MiB);
  CHECK_EQ(d.alloc.stats().num_alloc_retries, 0);  // collected before the source call, no retry
  CHECK_LE(d.alloc.memory_reserved(), 50 * MiB);
  d.alloc.free(c);
}

TEST_CASE("requests above 1 EiB fail at once with an OOM that is not counted, as in PyTorch") {
  // PyTorch checks the size before the device's allocator (and its stats) sees the request.
  Device d;
  CHECK_THROWS_AS(d.alloc.allocate(size_t{1} << 61), OutOfMemoryError);
  CHECK_EQ(d.alloc.stats().num_ooms, 0);
}

}  // TEST_SUITE("allocator")

TEST_CASE("threads allocating and freeing at once leave exact statistics and no overlap") {
  // Four threads on one allocator, each 2000 times: a mix of cache hits (the size it freed last),
  // small and large requests, some held across iterations. Each writes its id into every byte of
  // its blocks and checks them before freeing: two threads handed overlapping bytes would see
  // each other's ids. After the joins every count balances.
  BoundedMemory memory(256 << 20, "sim:0");
  CachingAllocator alloc(memory);
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  std::vector<int> corrupted(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&alloc, &corrupted, t] {
      std::vector<Block> held;
      const auto fill = [t](const Block& b) { std::memset(b.ptr, t + 1, b.requested); };
      const auto intact = [t](const Block& b) {
        const auto* p = static_cast<const unsigned char*>(b.ptr);
        for (size_t i = 0; i < b.requested; ++i) {
          if (p[i] != static_cast<unsigned char>(t + 1)) return false;
        }
        return true;
      };
      for (int round = 0; round < kRounds; ++round) {
        const size_t sizes[] = {64, 4096, 512 * 1024 + 100, 3 << 20};
        const Block b = alloc.allocate(sizes[(round * (t + 1)) % 4]);
        fill(b);
        if (round % 7 == 0) {
          held.push_back(b);
        } else {
          corrupted[t] += intact(b) ? 0 : 1;
          alloc.free(b);
        }
        if (held.size() > 8) {
          corrupted[t] += intact(held.front()) ? 0 : 1;
          alloc.free(held.front());
          held.erase(held.begin());
        }
      }
      for (const Block& b : held) {
        corrupted[t] += intact(b) ? 0 : 1;
        alloc.free(b);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) CHECK_EQ(corrupted[t], 0);
  const MemoryStats s = alloc.stats();
  CHECK_EQ(s.allocated_bytes.all().current, 0);
  CHECK_EQ(s.active.all().current, 0);
  CHECK_EQ(s.requested_bytes.all().current, 0);
  CHECK_EQ(s.allocation.all().allocated, kThreads * kRounds);
  CHECK_EQ(s.allocation.all().freed, kThreads * kRounds);
  CHECK_EQ(s.allocated_bytes.all().allocated, s.allocated_bytes.all().freed);
  CHECK(s.allocated_bytes.all().peak <= s.reserved_bytes.all().peak);
  // Every segment is whole again, so empty_cache returns all of them.
  alloc.empty_cache();
  CHECK_EQ(alloc.stats().reserved_bytes.all().current, 0);
  CHECK_EQ(memory.free_bytes(), memory.capacity());
}
