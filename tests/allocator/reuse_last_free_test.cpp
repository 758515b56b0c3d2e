// The caching policy's last free, undone (allocator/caching_allocator.h): a block freed and asked
// for again at once is handed back without its merge and split. Two allocators on two simulated
// devices of the same size, one with it and one without, run the same random program (requests
// of mixed sizes, many the size just freed; frees in any order; other streams; record_stream with
// events completed by hand; empty_cache; snapshots; OOMs on a small device; max_split_size and
// power-of-two rounding), and after every call must agree exactly: each Block's offset and
// size, every statistic, and the snapshot's segments and blocks.
//
// The frame's hot block (allocator/policy_allocator.h) serves a free and the same request again
// without the policy and counts those pairs late, when anything else takes the lock: reading the
// stats after every call would settle it each time, so a second run reads them only now and
// then, between bursts of such pairs, and must agree wherever it reads.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "allocator/bounded_memory.h"
#include "allocator/caching_allocator.h"
#include "allocator/error.h"
#include "tests/support/manual_events.h"

using namespace memgrad;
using memgrad::testing::ManualEvents;

namespace {

struct Side {
  Side(size_t capacity, const AllocatorConfig& config, bool reuse)
      : memory(capacity, "sim:0"), alloc(memory, config) {
    alloc.set_stream_events(&events);
    alloc.set_reuse_last_free(reuse);
  }
  BoundedMemory memory;
  ManualEvents events;
  CachingAllocator alloc;
  std::vector<Block> live;

  uint64_t offset(const Block& b) const {
    return b.ptr == nullptr ? 0 : reinterpret_cast<uintptr_t>(b.ptr) - memory.address_base();
  }
};

// Every figure of `s` as text, one per line, so that a difference names its statistic.
std::string describe(const MemoryStats& s) {
  std::string out;
  const std::pair<const char*, const PooledStat*> pooled[] = {
      {"allocation", &s.allocation},
      {"segment", &s.segment},
      {"active", &s.active},
      {"inactive_split", &s.inactive_split},
      {"allocated_bytes", &s.allocated_bytes},
      {"reserved_bytes", &s.reserved_bytes},
      {"active_bytes", &s.active_bytes},
      {"inactive_split_bytes", &s.inactive_split_bytes},
      {"requested_bytes", &s.requested_bytes}};
  auto stat = [&](const std::string& name, const Stat& v) {
    out += fmt::format("{}: {} {} {} {}\n", name, v.current, v.peak, v.allocated, v.freed);
  };
  for (const auto& [name, p] : pooled) {
    for (size_t i = 0; i < p->pools.size(); ++i) stat(fmt::format("{}[{}]", name, i), p->pools[i]);
  }
  stat("oversize_allocations", s.oversize_allocations);
  stat("oversize_segments", s.oversize_segments);
  out += fmt::format("retries {} ooms {} syncs {} device allocs {} frees {}\n", s.num_alloc_retries,
                     s.num_ooms, s.num_sync_all_streams, s.num_device_alloc, s.num_device_free);
  return out;
}

std::string describe(const std::vector<SegmentSnapshot>& segments) {
  std::string out;
  for (const SegmentSnapshot& seg : segments) {
    out += fmt::format("segment {} {} stream {} small {}:", seg.address, seg.nbytes, seg.stream,
                       seg.small_pool);
    for (const BlockSnapshot& b : seg.blocks) {
      out += fmt::format(" [{} {} {} {}{}]", b.address, b.nbytes, b.requested,
                         b.allocated ? "a" : "f", b.pending_free ? "p" : "");
    }
    out += "\n";
  }
  return out;
}

// Runs `steps` random calls on both sides, comparing the stats after one call in `check_period`
// (on average); returns how many requests asked for the size just freed, on the default stream
// (those the undo may serve).
int run_program(uint64_t seed, size_t capacity, const AllocatorConfig& config, int steps,
                int check_period = 1) {
  Side with(capacity, config, true), without(capacity, config, false);
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t n) { return static_cast<size_t>(rng() % n); };
  // Small-pool sizes, large ones that share a 20 MiB segment (two of 9.5 MiB leave a 1 MiB rest,
  // which a large block does not split off), and large ones with segments of their own.
  const size_t sizes[] = {1,
                          64,
                          512,
                          513,
                          4096,
                          100000,
                          1 << 20,
                          (1 << 20) + 1,
                          3 << 20,
                          6 << 20,
                          (9 << 20) + (1 << 19),
                          12 << 20,
                          25 << 20,
                          64 << 20};
  size_t last_freed = 0;
  int reused = 0;
  for (int step = 0; step < steps; ++step) {
    CAPTURE(seed);
    CAPTURE(step);
    const size_t op = pick(100);
    if (op < 45 || with.live.empty()) {
      // The size just freed, most of the time after a free (the loop the undo is for).
      const size_t n = last_freed != 0 && pick(3) != 0
                           ? last_freed
                           : sizes[pick(std::size(sizes))] + pick(3) * 512;
      const StreamId stream = pick(10) == 0 ? 3 : kDefaultStream;
      Block a, b;
      bool oom_a = false, oom_b = false;
      try {
        a = with.alloc.allocate(n, stream);
      } catch (const OutOfMemoryError&) {
        oom_a = true;
      }
      try {
        b = without.alloc.allocate(n, stream);
      } catch (const OutOfMemoryError&) {
        oom_b = true;
      }
      REQUIRE_EQ(oom_a, oom_b);
      if (!oom_a) {
        REQUIRE_EQ(with.offset(a), without.offset(b));
        REQUIRE_EQ(a.nbytes, b.nbytes);
        if (n == last_freed && stream == kDefaultStream) ++reused;
        with.live.push_back(a);
        without.live.push_back(b);
      }
      last_freed = 0;
    } else if (op < 85) {
      // Free the newest block most of the time (a tensor that dies at once), else any.
      const size_t i = pick(2) == 0 ? with.live.size() - 1 : pick(with.live.size());
      if (pick(8) == 0) {  // another stream used it: its free waits for an event
        with.alloc.record_stream(with.live[i], 5);
        without.alloc.record_stream(without.live[i], 5);
      }
      last_freed = with.live[i].requested;
      with.alloc.free(with.live[i]);
      without.alloc.free(without.live[i]);
      with.live.erase(with.live.begin() + static_cast<std::ptrdiff_t>(i));
      without.live.erase(without.live.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op < 92) {
      // Events complete, in order (one per record_stream; the same on both sides).
      REQUIRE_EQ(with.events.done.size(), without.events.done.size());
      for (size_t e = 0; e < with.events.done.size(); ++e) {
        if (pick(2) == 0) with.events.done[e] = without.events.done[e] = 1;
      }
    } else if (op < 95) {
      with.alloc.empty_cache();
      without.alloc.empty_cache();
      last_freed = 0;
    } else if (op < 97) {
      REQUIRE_EQ(describe(with.alloc.snapshot()), describe(without.alloc.snapshot()));
    } else {
      // A loop that frees the newest tensor and makes the same one again, 1 to 40 times.
      const size_t pairs = 1 + pick(40);
      for (size_t k = 0; k < pairs; ++k) {
        Block& a = with.live.back();
        Block& b = without.live.back();
        const size_t n = a.requested;
        const StreamId stream = a.stream;
        with.alloc.free(a);
        without.alloc.free(b);
        a = with.alloc.allocate(n, stream);
        b = without.alloc.allocate(n, stream);
        REQUIRE_EQ(with.offset(a), without.offset(b));
        REQUIRE_EQ(a.nbytes, b.nbytes);
      }
      last_freed = 0;
    }
    if (pick(static_cast<uint64_t>(check_period)) == 0) {
      REQUIRE_EQ(describe(with.alloc.stats()), describe(without.alloc.stats()));
    }
  }
  REQUIRE_EQ(describe(with.alloc.snapshot()), describe(without.alloc.snapshot()));
  for (size_t i = 0; i < with.live.size(); ++i) {
    with.alloc.free(with.live[i]);
    without.alloc.free(without.live[i]);
  }
  REQUIRE_EQ(describe(with.alloc.stats()), describe(without.alloc.stats()));
  return reused;
}

}  // namespace

TEST_SUITE("allocator") {
TEST_CASE("reusing the last free changes no block, statistic or snapshot") {
  AllocatorConfig split_limited;
  split_limited.max_split_size = 16 * kMiB;
  AllocatorConfig rounded;
  rounded.roundup_power2_divisions.fill(4);
  struct Case {
    const char* name;
    size_t capacity;
    AllocatorConfig config;
  };
  const Case cases[] = {{"default", 4096 * kMiB, {}},
                        {"small device (OOMs, retries)", 96 * kMiB, {}},
                        {"max_split_size 16 MiB", 4096 * kMiB, split_limited},
                        {"roundup_power2_divisions 4", 4096 * kMiB, rounded}};
  for (const Case& c : cases) {
    CAPTURE(c.name);
    int reused = 0;
    for (uint64_t seed = 1; seed <= 12; ++seed)
      reused += run_program(seed, c.capacity, c.config, 1500);
    CHECK(reused > 1000);  // the programs ask for the size just freed often
  }
}

TEST_CASE("the hot block's pairs, counted late, leave every statistic as counted at once") {
  AllocatorConfig split_limited;
  split_limited.max_split_size = 4 * kMiB;  // oversize blocks among the sizes, counted in pairs
  for (const AllocatorConfig& config : {AllocatorConfig{}, split_limited}) {
    for (uint64_t seed = 101; seed <= 106; ++seed) run_program(seed, 4096 * kMiB, config, 1500, 16);
  }
}

TEST_CASE("pairs served by the hot block are counted, and traced only while the trace is on") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  CachingAllocator alloc(memory);
  const Block first = alloc.allocate(4096);
  Block b = alloc.allocate(4096);
  alloc.free(b);
  b = alloc.allocate(4096);  // the last free undone: the hot block from here
  for (int i = 0; i < 1000; ++i) {
    alloc.free(b);
    b = alloc.allocate(4096);
  }
  alloc.free(b);  // freed by its caller, not yet given back to the policy
  alloc.trace().enable();
  b = alloc.allocate(4096);  // the trace is on: counted and recorded at once
  // Allocations: first, b, its undo, the 1000 pairs and the last; frees of b: 1 + 1000 + 1.
  const MemoryStats s = alloc.stats();
  CHECK_EQ(s.allocation.all().allocated, 1004);
  CHECK_EQ(s.allocation.all().freed, 1002);
  CHECK_EQ(s.allocated_bytes.all().freed, 1002 * 4096);
  CHECK_EQ(s.allocated_bytes.all().current, 2 * 4096);
  CHECK_EQ(s.allocated_bytes.all().peak, 2 * 4096);
  CHECK_EQ(s.requested_bytes.all().allocated, 1004 * 4096);
  CHECK_EQ(s.allocation.small_pool().allocated, 1004);
  // The segment's free rest is one inactive split block: each free of b adds its 4096 bytes
  // to it (counted as merged), each allocation of b takes them away.
  CHECK_EQ(s.inactive_split.all().current, 1);
  CHECK_EQ(s.inactive_split_bytes.all().allocated,
           static_cast<int64_t>(2 * kMiB - 4096) + 1002 * 4096);
  CHECK_EQ(s.inactive_split_bytes.all().freed, 1003 * 4096);
  CHECK_EQ(s.inactive_split_bytes.all().peak, static_cast<int64_t>(2 * kMiB - 4096));
  const std::vector<TraceEvent> events = alloc.trace().events();
  REQUIRE_EQ(events.size(), 1);  // the allocation after enable(); none of the pairs before it
  CHECK_EQ(events[0].action, TraceAction::Alloc);
  CHECK_EQ(events[0].allocated, 2 * 4096);
  alloc.free(b);
  alloc.free(first);
}

TEST_CASE("a block freed and asked for again comes back in place, the split stats as merged") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  CachingAllocator alloc(memory);
  const Block first = alloc.allocate(4096);
  const Block kept = alloc.allocate(4096);
  alloc.free(kept);
  // Counted as merged into the free rest of the segment at once: one inactive split block.
  CHECK_EQ(alloc.stats().inactive_split.all().current, 1);
  CHECK_EQ(alloc.stats().inactive_split_bytes.all().current, static_cast<int64_t>(2 * kMiB - 4096));
  const Block again = alloc.allocate(4000);  // rounds to 4096: the same block
  CHECK_EQ(again.ptr, kept.ptr);
  CHECK_EQ(alloc.stats().inactive_split_bytes.all().current, static_cast<int64_t>(2 * kMiB - 8192));
  // A request of another size merges it first, then best fit splits the merged block.
  alloc.free(again);
  const Block other = alloc.allocate(8192);
  CHECK_EQ(other.ptr, kept.ptr);
  alloc.free(other);
  alloc.free(first);
  CHECK_EQ(alloc.stats().inactive_split.all().current, 0);
}
}  // TEST_SUITE("allocator")
