// The allocator trace: the exact event sequence of a small program on a simulated device, the
// context captured from the scoped guards, the JSON dump, the ring buffer, silence when off, and
// the SVG timeline's downsampling, which must keep every peak.
//
// Addresses are relative to the BoundedMemory's base, so they are the same on every run: the
// first segment starts at 0 and the next one right after it (first fit).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "allocator/bounded_memory.h"
#include "allocator/caching_allocator.h"
#include "allocator/error.h"
#include "allocator/trace.h"

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

// Runs the program the trace tests read: a small and a large block in a forward phase (the
// large one inside a nested op and label), frees in a backward phase, empty_cache, then an OOM.
void run_program(CachingAllocator& alloc) {
  Block a;
  Block b;
  {
    TracePhaseScope phase("forward");
    TraceOpScope op("matmul");
    a = alloc.allocate(4000);
    {
      TraceOpScope inner("relu");
      TraceLabelScope label("layer 1");
      b = alloc.allocate(5 * MiB);
    }
    alloc.free(a);
  }
  TracePhaseScope phase("backward");
  alloc.free(b);
  alloc.empty_cache();
  CHECK_THROWS_AS(alloc.allocate(100 * MiB), OutOfMemoryError);
}

// The y coordinates of the SVG path of class `cls` ("reserved" or "allocated"): its M point's
// and every V's, in order (trace_svg.cpp draws each line as M x,y then H x and V y steps).
std::vector<double> path_ys(const std::string& svg, const std::string& cls) {
  const std::string tail = "\" class=\"" + cls + "\"/>";
  const size_t end = svg.find(tail);
  REQUIRE(end != std::string::npos);
  const size_t begin = svg.rfind("<path d=\"", end) + 9;
  const std::string d = svg.substr(begin, end - begin);
  std::vector<double> ys = {std::strtod(d.c_str() + d.find(',') + 1, nullptr)};
  for (size_t v = d.find('V'); v != std::string::npos; v = d.find('V', v + 1)) {
    ys.push_back(std::strtod(d.c_str() + v + 1, nullptr));
  }
  return ys;
}

// The y of the grid line of bytes 0 (the first one drawn).
double zero_line_y(const std::string& svg) {
  const size_t grid = svg.find("class=\"grid\"");
  REQUIRE(grid != std::string::npos);
  const size_t y1 = svg.rfind("y1=\"", grid);
  return std::strtod(svg.c_str() + y1 + 4, nullptr);
}

}  // namespace

TEST_SUITE("allocator") {

TEST_CASE("the SVG timeline keeps a one-event spike when it downsamples to pixel columns") {
  // 200,000 events a nanosecond apart, about 240 to each of the plot's pixel columns: reserved
  // is 10 MiB throughout but for one event at 50 MiB, allocated 4 MiB but for one at 30 MiB.
  std::vector<TraceEvent> events(200'000);
  for (size_t i = 0; i < events.size(); ++i) {
    events[i].time_ns = static_cast<int64_t>(i);
    events[i].reserved = static_cast<int64_t>(10 * MiB);
    events[i].allocated = static_cast<int64_t>(4 * MiB);
  }
  events[123'457].reserved = static_cast<int64_t>(50 * MiB);
  events[77'777].allocated = static_cast<int64_t>(30 * MiB);
  const std::string svg = trace_to_svg(events, {}, "spike", 0);
  CHECK(svg.size() < 200'000);  // downsampled: a few strokes per column, not one per event
  const double zero = zero_line_y(svg);
  for (const auto& [cls, spike, level] : {std::tuple{"reserved", 50.0, 10.0},
                                          std::tuple{"allocated", 30.0, 4.0}}) {
    CAPTURE(cls);
    const std::vector<double> ys = path_ys(svg, cls);
    CHECK(ys.size() < 4 * 1000);
    // The first point is the steady level; the highest (least y) must be the spike's, at
    // spike / level times its height above the zero line (to the path's 1/100 px).
    const double top = *std::min_element(ys.begin(), ys.end());
    const double steady = ys.front();
    CHECK_EQ((zero - top) / (zero - steady), doctest::Approx(spike / level).epsilon(0.001));
  }
  // Without the spikes, the lines stay at their steady levels.
  events[123'457].reserved = static_cast<int64_t>(10 * MiB);
  events[77'777].allocated = static_cast<int64_t>(4 * MiB);
  const std::string flat = trace_to_svg(events, {}, "flat", 0);
  const std::vector<double> ys = path_ys(flat, "reserved");
  CHECK_EQ(*std::min_element(ys.begin(), ys.end()), ys.front());
}

TEST_CASE("the trace records each alloc, free, segment map and OOM in order with exact numbers") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  CachingAllocator alloc(memory);
  alloc.trace().enable();
  run_program(alloc);
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
  run_program(alloc);
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

TEST_CASE("the trace records the stream a block was allocated on") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  CachingAllocator alloc(memory);
  alloc.trace().enable();
  Block b = alloc.allocate(4096, /*stream=*/3);
  alloc.free(b);
  for (const TraceEvent& e : alloc.trace().events()) CHECK_EQ(e.stream, 3);
  CHECK_EQ(alloc.trace().events().size(), 4);
}

TEST_CASE("the trace JSON has Chrome counter events and the raw events") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  CachingAllocator alloc(memory);
  alloc.trace().enable();
  run_program(alloc);
  const std::vector<TraceEvent> events = alloc.trace().events();
  const nlohmann::json doc =
      nlohmann::json::parse(alloc.trace().to_json("sim:0", "caching", memory.capacity()));
  CHECK_EQ(doc.at("device"), "sim:0");
  CHECK_EQ(doc.at("policy"), "caching");
  CHECK_EQ(doc.at("capacity"), 64 * MiB);

  const nlohmann::json& raw = doc.at("memgrad_events");
  REQUIRE_EQ(raw.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    CAPTURE(i);
    CHECK_EQ(raw[i].at("action"), std::string(trace_action_name(events[i].action)));
    CHECK_EQ(raw[i].at("addr"), events[i].address);
    CHECK_EQ(raw[i].at("size"), events[i].nbytes);
    CHECK_EQ(raw[i].at("requested"), events[i].requested);
    CHECK_EQ(raw[i].at("allocated"), events[i].allocated);
    CHECK_EQ(raw[i].at("reserved"), events[i].reserved);
    CHECK_EQ(raw[i].at("ctx"), events[i].context);
    CHECK_EQ(raw[i].at("t_ns"), events[i].time_ns);
  }
  CHECK_EQ(doc.at("contexts").size(), 3);
  CHECK_EQ(doc.at("contexts")[1].at("label"), "layer 1");

  // One counter sample per event, carrying allocated and reserved after it.
  std::vector<nlohmann::json> counters;
  int markers = 0;
  std::vector<std::string> slices;
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "C") counters.push_back(e);
    if (ph == "i") ++markers;
    if (ph == "X") slices.push_back(e.at("name"));
  }
  REQUIRE_EQ(counters.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    CAPTURE(i);
    CHECK_EQ(counters[i].at("args").at("allocated"), events[i].allocated);
    CHECK_EQ(counters[i].at("args").at("reserved"), events[i].reserved);
  }
  CHECK_EQ(markers, 5);  // two segment allocs, two segment frees, one OOM
  CHECK(slices == std::vector<std::string>{"forward", "backward"});
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

}  // TEST_SUITE
