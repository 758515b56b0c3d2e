// The passthrough policy: no cache, so every allocation is a source call, every free gives the
// bytes back at once, and allocated == reserved at all times.
#include <doctest/doctest.h>

#include <string>

#include "allocator/bounded_memory.h"
#include "allocator/error.h"
#include "allocator/host_memory.h"
#include "allocator/passthrough_allocator.h"
#include "tests/support/stats_delta.h"

using namespace memgrad;
using memgrad::testing::StatsDelta;

TEST_SUITE("allocator") {

TEST_CASE("passthrough rounds to 512 bytes and reserves exactly what it allocates") {
  BoundedMemory memory(16 * kMiB, "sim:0");
  PassthroughAllocator alloc(memory);
  Block a = alloc.allocate(1000);
  CHECK_EQ(a.nbytes, 1024);
  CHECK_EQ(a.requested, 1000);
  Block b = alloc.allocate(3 * kMiB + 1);
  CHECK_EQ(b.nbytes, 3 * kMiB + 512);
  MemoryStats s = alloc.stats();
  CHECK_EQ(s.allocated_bytes.all().current, 1024 + 3 * kMiB + 512);
  CHECK_EQ(s.reserved_bytes.all().current, 1024 + 3 * kMiB + 512);
  CHECK_EQ(s.requested_bytes.all().current, 1000 + 3 * kMiB + 1);
  CHECK_EQ(s.allocated_bytes.small_pool().current, 1024);
  CHECK_EQ(s.allocated_bytes.large_pool().current, 3 * kMiB + 512);
  CHECK_EQ(alloc.memory_allocated(), alloc.memory_reserved());
  CHECK_EQ(memory.bytes_in_use(), alloc.memory_reserved());
  alloc.free(a);
  alloc.free(b);
  CHECK_EQ(alloc.memory_reserved(), 0);
}

TEST_CASE("every passthrough allocation is a source call and every free returns the bytes") {
  BoundedMemory memory(16 * kMiB, "sim:0");
  PassthroughAllocator alloc(memory);
  StatsDelta delta(alloc);
  for (int i = 0; i < 3; ++i) {
    Block b = alloc.allocate(4096);
    CHECK_EQ(memory.bytes_in_use(), 4096);
    alloc.free(b);
    CHECK_EQ(memory.bytes_in_use(), 0);  // nothing cached
  }
  CHECK_EQ(delta.source_allocs(), 3);
  CHECK_EQ(alloc.stats().num_device_free, 3);
  CHECK_EQ(delta.reserved(), 0);
  CHECK_EQ(alloc.stats().reserved_bytes.all().peak, 4096);
}

TEST_CASE("a passthrough snapshot has one segment per live block, sorted by address") {
  BoundedMemory memory(16 * kMiB, "sim:0");
  PassthroughAllocator alloc(memory);
  Block a = alloc.allocate(512);
  Block b = alloc.allocate(2 * kMiB);
  Block c = alloc.allocate(700);
  alloc.free(a);
  const std::vector<SegmentSnapshot> snap = alloc.snapshot();
  REQUIRE_EQ(snap.size(), 2);
  CHECK_EQ(snap[0].address, 512);
  CHECK_EQ(snap[0].nbytes, 2 * kMiB);
  CHECK_FALSE(snap[0].small_pool);
  CHECK_EQ(snap[1].address, 512 + 2 * kMiB);
  CHECK_EQ(snap[1].nbytes, 1024);
  CHECK(snap[1].small_pool);
  REQUIRE_EQ(snap[1].blocks.size(), 1);
  CHECK_EQ(snap[1].blocks[0].requested, 700);
  CHECK(snap[1].blocks[0].allocated);
  alloc.free(b);
  alloc.free(c);
}

TEST_CASE("passthrough on a full bounded device throws an OOM with its numbers filled in") {
  BoundedMemory memory(4 * kMiB, "sim:0");
  PassthroughAllocator alloc(memory);
  Block a = alloc.allocate(3 * kMiB);
  StatsDelta delta(alloc);
  OutOfMemoryInfo info;
  try {
    alloc.allocate(2 * kMiB - 100);
    FAIL("expected OutOfMemoryError");
  } catch (const OutOfMemoryError& e) {
    info = e.info();
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.find("sim:0 out of memory. Tried to allocate 2.00 MiB (a segment for a request of "
                    "2.00 MiB)") == 0);
    // PyTorch's format_size shows exactly 1 MiB in KiB ("<= 1 MiB" is the KiB range).
    CHECK(what.find("of which 1024.00 KiB is free") != std::string::npos);
  }
  CHECK_EQ(info.device, "sim:0");
  CHECK_EQ(info.requested, 2 * kMiB - 100);
  CHECK_EQ(info.alloc_size, 2 * kMiB);
  CHECK_EQ(info.capacity, 4 * kMiB);
  CHECK_EQ(info.free, kMiB);
  CHECK_EQ(info.allowed, 4 * kMiB);
  CHECK_FALSE(info.fraction_set);
  CHECK_EQ(info.allocated, 3 * kMiB);
  CHECK_EQ(info.reserved, 3 * kMiB);
  CHECK_EQ(alloc.stats().num_ooms, 1);
  CHECK_EQ(delta.reserved(), 0);
  CHECK_EQ(delta.allocations(), 0);
  alloc.free(a);
}

TEST_CASE("a memory fraction caps what passthrough may reserve") {
  BoundedMemory memory(8 * kMiB, "sim:0");
  PassthroughAllocator alloc(memory);
  alloc.set_memory_fraction(0.5);
  Block a = alloc.allocate(3 * kMiB);
  try {
    alloc.allocate(2 * kMiB);  // 3 + 2 MiB > 0.5 x 8 MiB, although the device has room
    FAIL("expected OutOfMemoryError");
  } catch (const OutOfMemoryError& e) {
    CHECK(e.info().fraction_set);
    CHECK_EQ(e.info().allowed, 4 * kMiB);
    CHECK_EQ(e.info().free, 5 * kMiB);
    CHECK(std::string(e.what()).find("4.00 MiB allowed; ") != std::string::npos);
  }
  Block b = alloc.allocate(kMiB);  // exactly up to the allowed 4 MiB
  CHECK_EQ(alloc.memory_reserved(), 4 * kMiB);
  CHECK_THROWS_AS(alloc.set_memory_fraction(0.0), ConfigError);
  CHECK_THROWS_AS(alloc.set_memory_fraction(1.5), ConfigError);
  alloc.free(a);
  alloc.free(b);
}

TEST_CASE("a zero-byte passthrough request returns an empty block without a source call") {
  BoundedMemory memory(kMiB, "sim:0");
  PassthroughAllocator alloc(memory);
  StatsDelta delta(alloc);
  Block b = alloc.allocate(0);
  CHECK_EQ(b.ptr, nullptr);
  CHECK_EQ(b.nbytes, 0);
  alloc.free(b);
  CHECK_EQ(delta.source_allocs(), 0);
  CHECK_EQ(alloc.stats().num_device_free, 0);
}

TEST_CASE("freeing a passthrough block twice is an InternalError, not a double free") {
  BoundedMemory memory(kMiB, "sim:0");
  PassthroughAllocator alloc(memory);
  Block b = alloc.allocate(4096);
  alloc.free(b);
  CHECK_THROWS_AS(alloc.free(b), InternalError);
  CHECK_EQ(memory.bytes_in_use(), 0);
  CHECK_EQ(alloc.memory_reserved(), 0);
}

TEST_CASE("passthrough over host memory hands out usable page-aligned memory") {
  HostMemory host;
  PassthroughAllocator alloc(host);
  Block b = alloc.allocate(10000);
  REQUIRE_NE(b.ptr, nullptr);
  CHECK_EQ(reinterpret_cast<uintptr_t>(b.ptr) % HostMemory::kAlignment, 0);
  CHECK_EQ(host.bytes_in_use(), 10240);
  static_cast<char*>(b.ptr)[b.nbytes - 1] = 1;
  alloc.free(b);
  CHECK_EQ(host.bytes_in_use(), 0);
}

}  // TEST_SUITE("allocator")
