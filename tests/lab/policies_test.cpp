// The policy lab's policies one by one: the rule that defines each, on small exact layouts, and
// what all of them share (registration, the typed OOM on a bounded device, the trace, the
// expandable_segments spelling of MEMGRAD_ALLOC_CONF). The randomized and stress tests run every
// policy through long sequences; these tests pin down the layouts the docs describe.
//
// Addresses are offsets from the simulated device's base (BoundedMemory::address_base), so the
// first segment a policy obtains starts at 0.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "allocator/bounded_memory.h"
#include "allocator/caching_allocator.h"
#include "allocator/error.h"
#include "lab/policies/arena_allocator.h"
#include "lab/policies/buddy_allocator.h"
#include "lab/policies/expandable_allocator.h"
#include "lab/policies/first_fit_allocator.h"
#include "lab/policies/size_class_allocator.h"
#include "lab/policy_registry.h"
#include "tests/support/allocator_invariants.h"
#include "tests/support/error_check.h"

using namespace memgrad;
using memgrad::testing::check_allocator;
using memgrad::testing::check_config_error;
using memgrad::testing::known_policy_names;

namespace {

uint64_t offset(const PolicyAllocator& a, const Block& b) {
  return reinterpret_cast<uintptr_t>(b.ptr) - a.source().address_base();
}

// "A1024 F1024 F2048": the blocks of one segment, allocated or free, with their sizes.
std::string blocks_of(const SegmentSnapshot& seg) {
  std::string out;
  for (const BlockSnapshot& b : seg.blocks) {
    if (!out.empty()) out += ' ';
    out += b.allocated ? 'A' : 'F';
    out += std::to_string(b.nbytes);
  }
  return out;
}

// A source without expansion, named like a GPU: what the expandable policy must refuse.
class NoExpansionSource final : public MemorySource {
 public:
  void* allocate(size_t) override { return nullptr; }
  void free(void*, size_t) override {}
  size_t capacity() const override { return kGiB; }
  size_t free_bytes() const override { return kGiB; }
  size_t alignment() const override { return 256; }
  std::string name() const override { return "cuda:7"; }
  bool host_accessible() const override { return false; }
};

}  // namespace

TEST_SUITE("lab") {

// ---- buddy ----

TEST_CASE("buddy rounds to a power of two and splits an arena into halves down to the block") {
  BoundedMemory memory(256 * kMiB, "sim:0");
  BuddyAllocator buddy(memory);
  CHECK_EQ(BuddyAllocator::block_size(1), 512);
  CHECK_EQ(BuddyAllocator::block_size(1025), 2048);
  CHECK_EQ(BuddyAllocator::block_size(40 * kMiB), 64 * kMiB);
  const Block a = buddy.allocate(1000);
  CHECK_EQ(a.nbytes, 1024);
  CHECK_EQ(offset(buddy, a), 0);
  // One 32 MiB arena: the block, then one free buddy of each size 1 KiB ... 16 MiB, each at an
  // offset equal to its size. Free neighbours that are not buddies stay apart.
  const std::vector<SegmentSnapshot> snap = buddy.snapshot();
  REQUIRE_EQ(snap.size(), 1);
  CHECK_EQ(snap[0].nbytes, BuddyAllocator::kArenaSize);
  REQUIRE_EQ(snap[0].blocks.size(), 16);
  for (size_t i = 1; i < snap[0].blocks.size(); ++i) {
    CAPTURE(i);
    CHECK_FALSE(snap[0].blocks[i].allocated);
    CHECK_EQ(snap[0].blocks[i].nbytes, size_t{1024} << (i - 1));
    CHECK_EQ(snap[0].blocks[i].address, size_t{1024} << (i - 1));
  }
  // The smallest free order that fits, lowest address first: 3000 B takes the 4 KiB buddy.
  const Block b = buddy.allocate(3000);
  CHECK_EQ(b.nbytes, 4096);
  CHECK_EQ(offset(buddy, b), 4096);
  const MemoryStats s = buddy.stats();
  CHECK_EQ(s.allocated_bytes.all().current, 1024 + 4096);
  CHECK_EQ(s.requested_bytes.all().current, 1000 + 3000);
  CHECK_MESSAGE(check_allocator(buddy).empty(), check_allocator(buddy));
  buddy.free(a);
  buddy.free(b);
  CHECK_EQ(blocks_of(buddy.snapshot()[0]), "F33554432");  // merged back into the whole arena
  CHECK_EQ(buddy.stats().inactive_split_bytes.all().current, 0);
}

TEST_CASE("a freed buddy block merges only with its buddy, up the orders") {
  BoundedMemory memory(256 * kMiB, "sim:0");
  BuddyAllocator buddy(memory);
  const Block a = buddy.allocate(1024);  // [0, 1 KiB)
  const Block b = buddy.allocate(1024);  // [1 KiB, 2 KiB): a's buddy
  const Block c = buddy.allocate(2048);  // [2 KiB, 4 KiB): the buddy of a+b
  CHECK_EQ(offset(buddy, b), 1024);
  CHECK_EQ(offset(buddy, c), 2048);
  buddy.free(a);  // its buddy b is allocated: no merge
  CHECK_EQ(blocks_of(buddy.snapshot()[0]).substr(0, 22), "F1024 A1024 A2048 F409");
  buddy.free(b);  // merges with a into [0, 2 KiB); that block's buddy c is allocated
  CHECK_EQ(blocks_of(buddy.snapshot()[0]).substr(0, 16), "F2048 A2048 F409");
  CHECK_MESSAGE(check_allocator(buddy).empty(), check_allocator(buddy));
  buddy.free(c);
  CHECK_EQ(buddy.snapshot()[0].blocks.size(), 1);
  buddy.empty_cache();
  CHECK_EQ(memory.bytes_in_use(), 0);
}

// ---- size_class ----

TEST_CASE("size_class rounds to its classes and serves each class from its own slabs") {
  CHECK_EQ(SizeClassAllocator::class_size(1), 512);
  CHECK_EQ(SizeClassAllocator::class_size(1000), 1024);
  CHECK_EQ(SizeClassAllocator::class_size(4096), 4096);
  CHECK_EQ(SizeClassAllocator::class_size(4097), 5120);   // (4 KiB, 8 KiB] in 1 KiB steps
  CHECK_EQ(SizeClassAllocator::class_size(8193), 10240);  // (8 KiB, 16 KiB] in 2 KiB steps
  CHECK_EQ(SizeClassAllocator::class_size(40 * kMiB), 40 * kMiB);
  CHECK_EQ(SizeClassAllocator::slab_size(1536), 1365 * 1536);  // as many as fit in 2 MiB
  CHECK_EQ(SizeClassAllocator::slab_size(3 * kMiB), 3 * kMiB);

  BoundedMemory memory(64 * kMiB, "sim:0");
  SizeClassAllocator sc(memory);
  const Block a = sc.allocate(1000);  // class 1024
  const Block b = sc.allocate(1500);  // class 1536: a second slab
  CHECK_EQ(a.nbytes, 1024);
  CHECK_EQ(b.nbytes, 1536);
  CHECK_EQ(sc.stats().segment.all().current, 2);
  CHECK_EQ(sc.internal_waste_bytes(), 24 + 36);
  const uint64_t a_at = offset(sc, a);
  sc.free(a);
  // The freed 1 KiB slot serves the next 1 KiB-class request, and only that class.
  const Block c = sc.allocate(600);
  CHECK_EQ(c.nbytes, 1024);
  CHECK_EQ(offset(sc, c), a_at);
  sc.free(b);
  const Block d = sc.allocate(512);  // class 512: a third slab, not a piece of b's slot
  CHECK_EQ(d.nbytes, 512);
  CHECK_EQ(sc.stats().segment.all().current, 3);
  // Never split: every slot of a slab has the slab's class.
  for (const SegmentSnapshot& seg : sc.snapshot()) {
    for (const BlockSnapshot& blk : seg.blocks) CHECK_EQ(blk.nbytes, seg.blocks[0].nbytes);
  }
  CHECK_MESSAGE(check_allocator(sc).empty(), check_allocator(sc));
  // Only the slab with no live slot (class 1536) goes back.
  sc.empty_cache();
  CHECK_EQ(sc.stats().segment.all().current, 2);
  sc.free(c);
  sc.free(d);
  CHECK_EQ(sc.internal_waste_bytes(), 0);
  sc.empty_cache();
  CHECK_EQ(memory.bytes_in_use(), 0);
}

// ---- arena ----

TEST_CASE("arena bumps, keeps freed holes until its chunk is empty, and reports the waste") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  ArenaAllocator arena(memory);
  const Block x = arena.allocate(kMiB);
  const Block y = arena.allocate(kMiB);
  const Block z = arena.allocate(kMiB);
  CHECK_EQ(offset(arena, y), kMiB);
  CHECK_EQ(offset(arena, z), 2 * kMiB);
  arena.free(y);
  // y's hole is not reused while x and z live: the next block goes after z.
  CHECK_EQ(arena.wasted_bytes(), kMiB);
  const Block w = arena.allocate(kMiB);
  CHECK_EQ(offset(arena, w), 3 * kMiB);
  CHECK_EQ(arena.stats().inactive_split_bytes.all().current, kMiB);
  // The chunk is full: the next request opens a second chunk.
  const Block v = arena.allocate(512);
  CHECK_EQ(offset(arena, v), ArenaAllocator::kChunkSize);
  CHECK_EQ(arena.stats().segment.all().current, 2);
  CHECK_MESSAGE(check_allocator(arena).empty(), check_allocator(arena));
  arena.free(w);
  arena.free(x);
  CHECK_EQ(arena.wasted_bytes(), 3 * kMiB);  // z keeps the first chunk from resetting
  arena.free(z);
  CHECK_EQ(arena.wasted_bytes(), 0);
  CHECK_EQ(blocks_of(arena.snapshot()[0]), "F4194304");  // reset: one free chunk
  arena.free(v);
  arena.empty_cache();
  CHECK_EQ(memory.bytes_in_use(), 0);
}

TEST_CASE("an arena chunk resets after its last free, whatever the order of the frees") {
  std::array<int, 4> order = {0, 1, 2, 3};
  do {
    CAPTURE(order[0] * 1000 + order[1] * 100 + order[2] * 10 + order[3]);
    BoundedMemory memory(64 * kMiB, "sim:0");
    ArenaAllocator arena(memory);
    std::array<Block, 4> blocks;
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = arena.allocate((i + 1) * 100 * kKiB);
    for (size_t k = 0; k < order.size(); ++k) {
      arena.free(blocks[static_cast<size_t>(order[k])]);
      CHECK_MESSAGE(check_allocator(arena).empty(), check_allocator(arena));
      // Until the last free, nothing goes back to offset 0.
      if (k + 1 < order.size()) CHECK_GT(arena.snapshot()[0].blocks.size(), 1);
    }
    CHECK_EQ(offset(arena, arena.allocate(kMiB)), 0);  // the same chunk, from its start
    CHECK_EQ(arena.stats().segment.all().current, 1);
  } while (std::next_permutation(order.begin(), order.end()));
}

// ---- first_fit ----

TEST_CASE(
    "first_fit takes the lowest-addressed free block that fits, where caching takes the best") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  FirstFitAllocator first(memory);
  CachingAllocator best(memory);
  for (PolicyAllocator* alloc :
       {static_cast<PolicyAllocator*>(&first), static_cast<PolicyAllocator*>(&best)}) {
    CAPTURE(alloc->policy_name());
    const Block a = alloc->allocate(300 * kKiB);
    const Block b = alloc->allocate(100 * kKiB);
    const Block c = alloc->allocate(100 * kKiB);
    const Block d = alloc->allocate(100 * kKiB);
    const uint64_t base = offset(*alloc, a);
    alloc->free(a);  // a 300 KiB hole at the segment's start
    alloc->free(c);  // a 100 KiB hole after b
    const Block e = alloc->allocate(80 * kKiB);
    const uint64_t expected = alloc == &first ? base : base + 400 * kKiB;
    CHECK_EQ(offset(*alloc, e), expected);
    CHECK_MESSAGE(check_allocator(*alloc).empty(), check_allocator(*alloc));
    for (const Block& blk : {b, d, e}) alloc->free(blk);
    CHECK_EQ(alloc->snapshot()[0].blocks.size(), 1);  // coalesced back into one block
    alloc->empty_cache();
  }
}

TEST_CASE("first_fit keeps one free list across segments, so small blocks fill large segments") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  FirstFitAllocator first(memory);
  const Block big = first.allocate(5 * kMiB);  // a 20 MiB segment, as caching would obtain
  const Block small = first.allocate(4096);    // caching would obtain a 2 MiB small segment
  CHECK_EQ(first.stats().segment.all().current, 1);
  CHECK_EQ(first.memory_reserved(), kLargeBuffer);
  CHECK_EQ(offset(first, small), 5 * kMiB);
  first.free(big);
  first.free(small);
}

// ---- expandable ----

TEST_CASE(
    "expandable maps pages into one growing segment and empty_cache unmaps whole free pages") {
  BoundedMemory memory(200 * kMiB, "sim:0");
  ExpandableAllocator ex(memory);
  ex.trace().enable();
  const Block a = ex.allocate(30 * kMiB);  // maps two 20 MiB pages
  CHECK_EQ(ex.memory_reserved(), 40 * kMiB);
  const Block b = ex.allocate(30 * kMiB);  // the 10 MiB tail plus one more page: grows in place
  CHECK_EQ(reinterpret_cast<char*>(b.ptr) - reinterpret_cast<char*>(a.ptr), 30 * kMiB);
  CHECK_EQ(ex.memory_reserved(), 60 * kMiB);
  MemoryStats s = ex.stats();
  CHECK_EQ(s.segment.all().current, 1);
  CHECK_EQ(s.num_device_alloc, 3);  // pages mapped
  CHECK_EQ(memory.bytes_in_use(), 60 * kMiB);
  CHECK_MESSAGE(check_allocator(ex).empty(), check_allocator(ex));

  ex.free(a);
  ex.empty_cache();  // [0, 20 MiB) holds nothing: unmapped; [20, 40) still holds part of b
  CHECK_EQ(ex.memory_reserved(), 40 * kMiB);
  std::vector<SegmentSnapshot> snap = ex.snapshot();
  REQUIRE_EQ(snap.size(), 1);
  CHECK_EQ(blocks_of(snap[0]), "F10485760 A31457280");
  CHECK_EQ(memory.bytes_in_use(), 40 * kMiB);

  // 15 MiB: no mapped free block fits; the lowest run (the unmapped page and the free 10 MiB)
  // is mapped again, in place.
  const Block c = ex.allocate(15 * kMiB);
  CHECK_EQ(reinterpret_cast<char*>(c.ptr), reinterpret_cast<char*>(a.ptr));
  CHECK_EQ(ex.memory_reserved(), 60 * kMiB);
  CHECK_EQ(ex.stats().segment.all().current, 1);
  CHECK_MESSAGE(check_allocator(ex).empty(), check_allocator(ex));

  // The small pool grows its own segment in 2 MiB pages.
  const Block d = ex.allocate(1000);
  CHECK_EQ(d.nbytes, 1024);
  CHECK_EQ(ex.memory_reserved(), 62 * kMiB);
  CHECK_EQ(ex.stats().segment.all().current, 2);
  for (const Block& blk : {b, c, d}) ex.free(blk);
  ex.empty_cache();
  s = ex.stats();
  CHECK_EQ(s.reserved_bytes.all().current, 0);
  CHECK_EQ(s.segment.all().current, 0);
  CHECK_EQ(s.num_device_alloc, s.num_device_free);
  CHECK_EQ(s.inactive_split_bytes.all().peak, 0);  // expandable segments report none, as PyTorch
  CHECK_EQ(memory.bytes_in_use(), 0);
  size_t maps = 0;
  size_t unmaps = 0;
  for (const TraceEvent& e : ex.trace().events()) {
    maps += e.action == TraceAction::SegmentMap ? 1 : 0;
    unmaps += e.action == TraceAction::SegmentUnmap ? 1 : 0;
  }
  CHECK_EQ(maps, 4);  // pages 0-1, page 2, page 0 again, one small page
  CHECK_GE(unmaps, 2);
}

TEST_CASE("stitch maps a free page elsewhere into the run a request needs instead of growing") {
  // The rule alone, with expandable's pages of 20 MiB: x on page 0, y on page 1, z on the first
  // half of page 2; x is freed, so page 0 is whole and free. 30 MiB fits no free block: the
  // lowest run long enough is page 2's free half and page 3. Expandable maps page 3 (reserved 80
  // MiB); stitch first unmaps page 0 and maps its memory as page 3 (reserved stays 60 MiB). Both
  // hand out the same address.
  for (const bool stitch : {false, true}) {
    CAPTURE(stitch);
    BoundedMemory memory(200 * kMiB, "sim:0");
    ExpandableAllocator ex(memory, {}, {ExpandableAllocator::kLargePage, stitch});
    CHECK_EQ(ex.policy_name(), stitch ? "stitch" : "expandable");
    ex.trace().enable();
    const Block x = ex.allocate(20 * kMiB);
    const Block y = ex.allocate(20 * kMiB);
    const Block z = ex.allocate(10 * kMiB);
    ex.free(x);
    CHECK_EQ(ex.memory_reserved(), 60 * kMiB);
    const Block w = ex.allocate(30 * kMiB);
    CHECK_EQ(offset(ex, w) - offset(ex, x), 50 * kMiB);  // after z, across pages 2 and 3
    CHECK_EQ(ex.memory_reserved(), stitch ? 60 * kMiB : 80 * kMiB);
    CHECK_EQ(memory.bytes_in_use(), ex.memory_reserved());
    CHECK_EQ(ex.stitched_pages(), stitch ? 1 : 0);
    const MemoryStats s = ex.stats();
    CHECK_EQ(s.num_device_alloc, 4);              // pages 0, 1, 2 and 3
    CHECK_EQ(s.num_device_free, stitch ? 1 : 0);  // page 0, moved
    CHECK_EQ(s.segment.all().current, 1);         // pages 0-3, or (stitch) pages 1-3
    CHECK_MESSAGE(check_allocator(ex).empty(), check_allocator(ex));
    std::vector<TraceAction> segment_events;
    for (const TraceEvent& e : ex.trace().events()) {
      if (e.action == TraceAction::SegmentMap || e.action == TraceAction::SegmentUnmap) {
        segment_events.push_back(e.action);
      }
    }
    const std::vector<TraceAction> expected =
        stitch
            ? std::vector{TraceAction::SegmentMap, TraceAction::SegmentMap, TraceAction::SegmentMap,
                          TraceAction::SegmentUnmap, TraceAction::SegmentMap}
            : std::vector{TraceAction::SegmentMap, TraceAction::SegmentMap, TraceAction::SegmentMap,
                          TraceAction::SegmentMap};
    CHECK(segment_events == expected);
    for (const Block& b : {y, z, w}) ex.free(b);
  }
}

TEST_CASE("stitch never takes a page of the run itself, and grows when no other page is free") {
  BoundedMemory memory(200 * kMiB, "sim:0");
  auto ex = std::make_unique<ExpandableAllocator>(
      memory, AllocatorConfig{},
      ExpandableAllocator::PageRules{ExpandableAllocator::kLargePage, true});
  const Block x = ex->allocate(20 * kMiB);  // page 0
  const Block y = ex->allocate(20 * kMiB);  // page 1
  ex->free(y);                              // page 1 whole and free, page 2 unmapped
  // 30 MiB: the run is page 1 and page 2. Page 1 is the only whole free page, and it is part of
  // the run: it stays, and page 2 is mapped anew.
  const Block w = ex->allocate(30 * kMiB);
  CHECK_EQ(offset(*ex, w) - offset(*ex, x), 20 * kMiB);
  CHECK_EQ(ex->memory_reserved(), 60 * kMiB);
  CHECK_EQ(ex->stats().num_device_free, 0);
  CHECK_MESSAGE(check_allocator(*ex).empty(), check_allocator(*ex));
  for (const Block& blk : {x, w}) ex->free(blk);
}

TEST_CASE("policy:stitch maps 2 MiB pages in both pools") {
  BoundedMemory memory(200 * kMiB, "sim:0");
  auto stitch = make_allocator(AllocatorConfig::parse("policy:stitch"), memory);
  CHECK_EQ(stitch->policy_name(), "stitch");
  const Block a = stitch->allocate(3 * kMiB);  // large pool: two 2 MiB pages, not one of 20
  CHECK_EQ(stitch->memory_reserved(), 4 * kMiB);
  const Block b = stitch->allocate(1000);  // small pool: one 2 MiB page
  CHECK_EQ(stitch->memory_reserved(), 6 * kMiB);
  CHECK_MESSAGE(check_allocator(*stitch).empty(), check_allocator(*stitch));
  stitch->free(a);
  stitch->free(b);
  CHECK_THROWS_WITH_AS(ExpandableAllocator(memory, {}, {3 * kMiB, true}),
                       doctest::Contains("not a multiple"), ConfigError);
}

TEST_CASE("expandable refuses a source that cannot map pages, naming the device") {
  NoExpansionSource gpu;
  CHECK_THROWS_WITH_AS(ExpandableAllocator{gpu}, doctest::Contains("cuda:7"), ConfigError);
  CHECK_THROWS_WITH_AS(make_allocator(AllocatorConfig::parse("policy:expandable"), gpu),
                       doctest::Contains("policy:expandable"), ConfigError);
  CHECK_THROWS_AS(gpu.reserve(kMiB), Error);  // the default expansion methods say no
}

TEST_CASE("expandable stops at its memory fraction") {
  BoundedMemory memory(100 * kMiB, "sim:0");
  ExpandableAllocator ex(memory, AllocatorConfig::parse("per_process_memory_fraction:0.5"));
  const Block a = ex.allocate(30 * kMiB);  // 40 MiB mapped, a 10 MiB free tail
  const Block b = ex.allocate(5 * kMiB);   // fits the tail: nothing mapped
  CHECK_EQ(ex.memory_reserved(), 40 * kMiB);
  CHECK_THROWS_AS(ex.allocate(15 * kMiB), OutOfMemoryError);  // one more page: 60 > 50 MiB
  CHECK_EQ(ex.memory_reserved(), 40 * kMiB);
  CHECK_EQ(ex.stats().num_ooms, 1);
  ex.free(a);
  ex.free(b);
}

// ---- every policy ----

TEST_CASE("every policy is registered and raises a typed OOM on a full bounded device") {
  std::string policy;
  for (const std::string& name : known_policy_names()) {
    SUBCASE(name.c_str()) { policy = name; }
  }
  CAPTURE(policy);
  BoundedMemory memory(64 * kMiB, "sim:3");
  AllocatorConfig config;
  config.policy = policy;
  std::unique_ptr<PolicyAllocator> alloc = make_allocator(config, memory);
  CHECK_EQ(alloc->policy_name(), policy);
  alloc->trace().enable();
  const Block first = alloc->allocate(40 * kMiB);
  try {
    (void)alloc->allocate(40 * kMiB);
    FAIL("a second 40 MiB block fitted in a 64 MiB device");
  } catch (const OutOfMemoryError& e) {
    CHECK_EQ(e.info().device, "sim:3");
    CHECK_EQ(e.info().requested, 40 * kMiB);
    CHECK_EQ(e.info().capacity, 64 * kMiB);
    CHECK_EQ(e.info().allocated, first.nbytes);
    CHECK_EQ(e.info().reserved, alloc->memory_reserved());
    CHECK_GT(e.info().reserved + e.info().alloc_size, e.info().allowed);
    CHECK_NE(std::string(e.what()).find("out of memory"), std::string::npos);
  }
  CHECK_EQ(alloc->stats().num_ooms, 1);
  // The OOM changed nothing; after a free the same request fits.
  CHECK_MESSAGE(check_allocator(*alloc).empty(), check_allocator(*alloc));
  alloc->free(first);
  const Block again = alloc->allocate(40 * kMiB);
  alloc->free(again);
  // The trace saw both allocations, the OOM between them, and the frees, in order.
  std::vector<TraceAction> calls;
  for (const TraceEvent& e : alloc->trace().events()) {
    if (e.action == TraceAction::Alloc || e.action == TraceAction::FreeRequested ||
        e.action == TraceAction::Oom) {
      calls.push_back(e.action);
    }
  }
  const std::vector<TraceAction> expected = {TraceAction::Alloc, TraceAction::Oom,
                                             TraceAction::FreeRequested, TraceAction::Alloc,
                                             TraceAction::FreeRequested};
  CHECK(calls == expected);
  CHECK_EQ(alloc->trace().events().back().allocated, 0);
}

// ---- configuration ----

TEST_CASE("expandable_segments:True selects the expandable policy, as PyTorch spells it") {
  CHECK_EQ(AllocatorConfig::parse("expandable_segments:True").policy, "expandable");
  CHECK_EQ(AllocatorConfig::parse("policy:caching,expandable_segments:True").policy, "expandable");
  CHECK_EQ(AllocatorConfig::parse("expandable_segments:True,policy:expandable").policy,
           "expandable");
  CHECK_EQ(AllocatorConfig::parse("expandable_segments:False").policy, "caching");
  CHECK_EQ(AllocatorConfig::parse("policy:buddy,expandable_segments:False").policy, "buddy");
  check_config_error([] { AllocatorConfig::parse("expandable_segments:true"); },
                     "expandable_segments", "true");
  CHECK_THROWS_WITH_AS(AllocatorConfig::parse("policy:buddy,expandable_segments:True"),
                       doctest::Contains("conflicts with policy:buddy"), ConfigError);
  CHECK_THROWS_AS(AllocatorConfig::parse("expandable_segments:False,policy:expandable"),
                  ConfigError);
  for (const std::string& name : known_policy_names()) {
    CAPTURE(name);
    CHECK_EQ(AllocatorConfig::parse("policy:" + name).policy, name);
  }
}

}  // TEST_SUITE("lab")
