// The allocator trace: the exact event sequence of a small program on a simulated device, the
// context captured from the scoped guards, the ring buffer, and silence when off. The files
// written from it: tests/interop/trace_writer_test.cpp.
//
// Addresses are relative to the BoundedMemory's base, so they are the same on every run: the
// first segment starts at 0 and the next one right after it (first fit).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "allocator/bounded_memory.h"
#include "allocator/caching_allocator.h"
#include "allocator/error.h"
#include "allocator/trace.h"
#include "tests/support/trace_program.h"

using namespace memgrad;

namespace {

constexpr uint64_t MiB = kMiB;

// What a test expects of one event (time is not compared).
struct Expected {
  TraceAction action;
  uint64_t address;
  uint64_t nbytes;
  uint64_t requested;
  int64_t allocated;
  int64_t reserved;
  uint32_t context;
};

void check_events(const std::vector<TraceEvent>& got, const std::vector<Expected>& want) {
  REQUIRE_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK_EQ(trace_action_name(got[i].action), trace_action_name(want[i].action));
    CHECK_EQ(got[i].address, want[i].address);
    CHECK_EQ(got[i].nbytes, want[i].nbytes);
    CHECK_EQ(got[i].requested, want[i].requested);
    CHECK_EQ(got[i].allocated, want[i].allocated);
    CHECK_EQ(got[i].reserved, want[i].reserved);
    CHECK_EQ(got[i].context, want[i].context);
    if (i > 0) CHECK_GE(got[i].time_ns, got[i - 1].time_ns);
  }
}

}  // namespace

TEST_SUITE("allocator") {

TEST_CASE("the trace records each alloc, free, segment map and OOM in order with exact numbers") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  CachingAllocator alloc(memory);
  alloc.trace().enable();
  memgrad::testing::run_trace_program(alloc);
  using A = TraceAction;
  // Contexts: 0 = forward/matmul, 1 = forward/relu/"layer 1", 2 = backward.
  check_events(alloc.trace().events(),
               {
                   {A::SegmentAlloc, 0, 2 * MiB, 0, 0, 2 * MiB, 0},
                   {A::Alloc, 0, 4096, 4000, 4096, 2 * MiB, 0},
                   {A::SegmentAlloc, 2 * MiB, 20 * MiB, 0, 4096, 22 * MiB, 1},
                   {A::Alloc, 2 * MiB, 5 * MiB, 5 * MiB, 4096 + 5 * MiB, 22 * MiB, 1},
                   {A::FreeRequested, 0, 4096, 4000, 5 * MiB, 22 * MiB, 0},
                   {A::FreeCompleted, 0, 4096, 4000, 5 * MiB, 22 * MiB, 0},
                   {A::FreeRequested, 2 * MiB, 5 * MiB, 5 * MiB, 0, 22 * MiB, 2},
                   {A::FreeCompleted, 2 * MiB, 5 * MiB, 5 * MiB, 0, 22 * MiB, 2},
                   // empty_cache releases the large pool first, then the small one.
                   {A::SegmentFree, 2 * MiB, 20 * MiB, 0, 0, 2 * MiB, 2},
                   {A::SegmentFree, 0, 2 * MiB, 0, 0, 0, 2},
                   // For an OOM the address is the device's free bytes and the size the
                   // segment that could not be obtained (PyTorch's convention).
                   {A::Oom, 64 * MiB, 100 * MiB, 100 * MiB, 0, 0, 2},
               });
  for (const TraceEvent& e : alloc.trace().events()) CHECK_EQ(e.stream, kDefaultStream);
}

TEST_CASE("trace contexts come from the phase, op and label scopes, and nesting restores them") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  CachingAllocator alloc(memory);
  alloc.trace().enable();
  memgrad::testing::run_trace_program(alloc);
  const std::vector<TraceContextRecord> contexts = alloc.trace().contexts();
  REQUIRE_EQ(contexts.size(), 3);
  CHECK_EQ(contexts[0].phase, "forward");
  CHECK_EQ(contexts[0].op, "matmul");
  CHECK_EQ(contexts[0].label, "");
  CHECK_EQ(contexts[1].phase, "forward");
  CHECK_EQ(contexts[1].op, "relu");
  CHECK_EQ(contexts[1].label, "layer 1");
  CHECK_EQ(contexts[2].phase, "backward");
  CHECK_EQ(contexts[2].op, "");
  CHECK_EQ(contexts[2].label, "");

  {
    TraceLabelScope outer("block");
    {
      TraceLabelScope inner("layer 2");
      TracePhaseScope phase("optimizer");
      CHECK_EQ(current_trace_context().label, "layer 2");
      CHECK_EQ(std::string(current_trace_context().phase), "optimizer");
    }
    CHECK_EQ(current_trace_context().label, "block");
    CHECK_EQ(std::string(current_trace_context().phase), "");
  }
  CHECK_EQ(current_trace_context().label, "");
  CHECK_EQ(std::string(current_trace_context().op), "");
}

TEST_CASE("the module scope and the names of blocks, counted against the events the ring keeps") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  CachingAllocator alloc(memory);
  alloc.trace().enable(4);
  const char* fc1 = intern_trace_string("fc1");
  CHECK_EQ(fc1, intern_trace_string(std::string("fc") + "1"));  // one pointer per text
  Block weight;
  {
    TraceModuleScope module(fc1);
    CHECK_EQ(std::string(current_trace_context().module), "fc1");
    weight = alloc.allocate(4000);  // segment_alloc, alloc
  }
  CHECK_EQ(std::string(current_trace_context().module), "");
  alloc.name_in_trace(weight.ptr, "fc1", "parameter");  // after 2 events
  alloc.name_in_trace(weight.ptr, "model.fc1", "parameter");
  const std::vector<TraceContextRecord> contexts = alloc.trace().contexts();
  REQUIRE_EQ(contexts.size(), 1);
  CHECK_EQ(contexts[0].module, "fc1");
  std::vector<TraceName> names = alloc.trace().names();
  REQUIRE_EQ(names.size(), 2);
  CHECK_EQ(names[0].event, 2);
  CHECK_EQ(names[0].address, 0);
  CHECK_EQ(names[1].module, "model.fc1");
  CHECK_EQ(names[1].role, "parameter");
  Block other = alloc.allocate(1000);  // event 3 (cache: no segment)
  alloc.free(other);                   // events 4 and 5: the ring drops the segment_alloc
  names = alloc.trace().names();
  REQUIRE_EQ(names.size(), 2);
  CHECK_EQ(names[0].event, 1);  // still right after the alloc, now the first event held
  alloc.free(weight);
  alloc.free(alloc.allocate(1000));  // 3 more: the named block's alloc is gone, and its names
  CHECK(alloc.trace().names().empty());
}

TEST_CASE("the trace records the stream a block was allocated on") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  CachingAllocator alloc(memory);
  alloc.trace().enable();
  Block b = alloc.allocate(4096, /*stream=*/3);
  alloc.free(b);
  for (const TraceEvent& e : alloc.trace().events()) CHECK_EQ(e.stream, 3);
  CHECK_EQ(alloc.trace().events().size(), 4);
}

TEST_CASE("the trace keeps the last max_entries events in order") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  CachingAllocator alloc(memory);
  alloc.trace().enable(3);
  Block a = alloc.allocate(4000);  // segment_alloc, alloc
  alloc.free(a);                   // free_requested, free_completed
  using A = TraceAction;
  check_events(alloc.trace().events(), {
                                           {A::Alloc, 0, 4096, 4000, 4096, 2 * MiB, 0},
                                           {A::FreeRequested, 0, 4096, 4000, 0, 2 * MiB, 0},
                                           {A::FreeCompleted, 0, 4096, 4000, 0, 2 * MiB, 0},
                                       });
  Block b = alloc.allocate(1000);  // a cache hit: one more event, the ring wraps
  check_events(alloc.trace().events(), {
                                           {A::FreeRequested, 0, 4096, 4000, 0, 2 * MiB, 0},
                                           {A::FreeCompleted, 0, 4096, 4000, 0, 2 * MiB, 0},
                                           {A::Alloc, 0, 1024, 1000, 1024, 2 * MiB, 0},
                                       });
  alloc.free(b);
}

TEST_CASE("with the trace off nothing is recorded, and enable starts afresh") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  CachingAllocator alloc(memory);
  CHECK_FALSE(alloc.trace().enabled());
  Block a = alloc.allocate(4000);
  alloc.free(a);
  CHECK(alloc.trace().events().empty());
  CHECK(alloc.trace().contexts().empty());

  alloc.trace().enable();
  Block b = alloc.allocate(4000);
  CHECK_EQ(alloc.trace().events().size(), 1);  // a cache hit: just the alloc
  alloc.trace().disable();
  alloc.free(b);
  CHECK_EQ(alloc.trace().events().size(), 1);  // kept after disable, nothing added

  alloc.trace().enable();
  CHECK(alloc.trace().events().empty());
  alloc.trace().clear();
  CHECK(alloc.trace().events().empty());
}

}  // TEST_SUITE("allocator")
