// The pinned host policy's rules (PyTorch's CachingHostAllocator) on plain host memory with
// events completed by hand: power-of-two rounding, per-size-class reuse, never splitting,
// reuse deferred by record_stream until the event completes, empty_cache, and the statistics.
// The CUDA build serves pin_memory() with the same class over cudaHostAlloc.
#include <doctest/doctest.h>

#include <vector>

#include "allocator/bounded_memory.h"
#include "allocator/error.h"
#include "allocator/host_memory.h"
#include "allocator/pinned_host_allocator.h"
#include "tests/support/manual_events.h"

using namespace memgrad;
using memgrad::testing::ManualEvents;

TEST_SUITE("allocator") {

TEST_CASE("pinned requests round up to the next power of two") {
  CHECK_EQ(PinnedHostAllocator::round_size(0), 0);
  CHECK_EQ(PinnedHostAllocator::round_size(1), 1);
  CHECK_EQ(PinnedHostAllocator::round_size(1000), 1024);
  CHECK_EQ(PinnedHostAllocator::round_size(1024), 1024);
  CHECK_EQ(PinnedHostAllocator::round_size(1025), 2048);
  HostMemory memory;
  PinnedHostAllocator alloc(memory);
  const Block b = alloc.allocate(3000);
  CHECK_EQ(b.nbytes, 4096);
  CHECK_EQ(b.requested, 3000);
  const MemoryStats s = alloc.stats();
  CHECK_EQ(s.allocated_bytes.all().current, 4096);
  CHECK_EQ(s.reserved_bytes.all().current, 4096);
  CHECK_EQ(s.requested_bytes.all().current, 3000);
  CHECK_EQ(s.segment.all().current, 1);
  CHECK_EQ(s.num_device_alloc, 1);
  alloc.free(b);
  CHECK_EQ(alloc.memory_allocated(), 0);
  CHECK_EQ(alloc.memory_reserved(), 4096);  // cached, not returned
}

TEST_CASE("a freed pinned block serves the next request of its size class, never a split") {
  HostMemory memory;
  PinnedHostAllocator alloc(memory);
  const Block a = alloc.allocate(1000);
  void* ptr = a.ptr;
  alloc.free(a);
  const Block b = alloc.allocate(600);  // 1024 as well: the same block
  CHECK_EQ(b.ptr, ptr);
  CHECK_EQ(alloc.stats().num_device_alloc, 1);
  const Block c = alloc.allocate(200);  // 256: its own class, a new block (no split of 1024)
  CHECK_NE(c.ptr, ptr);
  CHECK_EQ(alloc.stats().num_device_alloc, 2);
  CHECK_EQ(alloc.memory_reserved(), 1024 + 256);
  alloc.free(b);
  alloc.free(c);
  CHECK_EQ(alloc.snapshot().size(), 2);  // one segment per block
}

TEST_CASE("a pinned block used by a copy is reused only after the copy's event") {
  HostMemory memory;
  PinnedHostAllocator alloc(memory);
  ManualEvents events;
  alloc.set_stream_events(&events);
  const Block a = alloc.allocate(4096);
  alloc.record_stream(a, 0);  // the default stream counts too: host blocks have no stream
  alloc.record_stream(a, 9);
  alloc.free(a);
  REQUIRE_EQ(events.streams.size(), 2);  // one event per stream, recorded at free time
  CHECK_EQ(events.streams[0], 0);
  CHECK_EQ(events.streams[1], 9);
  CHECK_EQ(alloc.memory_allocated(), 0);
  CHECK_EQ(alloc.stats().active_bytes.all().current, 4096);
  CHECK_EQ(alloc.pending_blocks(), 1);
  const Block b = alloc.allocate(4096);
  CHECK_NE(b.ptr, a.ptr);
  events.done[0] = 1;  // one of two events: still pending
  const Block c = alloc.allocate(4096);
  CHECK_NE(c.ptr, a.ptr);
  events.done[1] = 1;
  const Block d = alloc.allocate(4096);
  CHECK_EQ(d.ptr, a.ptr);
  CHECK_EQ(alloc.pending_blocks(), 0);
  for (const Block& x : {b, c, d}) alloc.free(x);
}

TEST_CASE("empty_cache returns cached pinned blocks and keeps pending and allocated ones") {
  HostMemory memory;
  PinnedHostAllocator alloc(memory);
  ManualEvents events;
  alloc.set_stream_events(&events);
  const Block kept = alloc.allocate(100);
  const Block cached = alloc.allocate(5000);
  const Block pending = alloc.allocate(70000);
  alloc.free(cached);
  alloc.record_stream(pending, 3);
  alloc.free(pending);
  alloc.empty_cache();
  CHECK_EQ(alloc.memory_reserved(), 128 + 131072);  // kept and the pending block
  CHECK_EQ(alloc.stats().num_device_free, 1);
  events.done[0] = 1;
  alloc.empty_cache();  // the event has completed: now cached, now returned
  CHECK_EQ(alloc.memory_reserved(), 128);
  alloc.free(kept);
  alloc.empty_cache();
  CHECK_EQ(alloc.memory_reserved(), 0);
  CHECK_EQ(alloc.stats().segment.all().current, 0);
}

TEST_CASE("a pinned source that is full raises OutOfMemoryError after returning the cache") {
  BoundedMemory memory(8192, "pinned-test");
  PinnedHostAllocator alloc(memory);
  const Block a = alloc.allocate(4096);
  alloc.free(a);                         // cached: 4096 of the 8192 are held
  const Block b = alloc.allocate(8000);  // 8192: fits only after the cache is returned
  CHECK_EQ(alloc.memory_reserved(), 8192);
  CHECK_THROWS_AS(alloc.allocate(1), OutOfMemoryError);
  CHECK_EQ(alloc.stats().num_ooms, 1);
  alloc.free(b);
}

}  // TEST_SUITE("allocator")
