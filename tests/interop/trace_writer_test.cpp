// The files written from an allocator trace: the JSON that Perfetto opens (counters, markers,
// phase slices, and the raw events read back by the lab) and the SVG timeline, whose
// downsampling must keep every peak.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "allocator/bounded_memory.h"
#include "allocator/caching_allocator.h"
#include "allocator/trace.h"
#include "interop/trace_svg.h"
#include "interop/trace_writer.h"
#include "tests/support/trace_program.h"

using namespace memgrad;

namespace {

constexpr uint64_t MiB = kMiB;

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

TEST_SUITE("interop") {

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
  for (const auto& [cls, spike, level] :
       {std::tuple{"reserved", 50.0, 10.0}, std::tuple{"allocated", 30.0, 4.0}}) {
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

TEST_CASE("the trace JSON has Chrome counter events and the raw events") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  CachingAllocator alloc(memory);
  alloc.trace().enable();
  memgrad::testing::run_trace_program(alloc);
  const std::vector<TraceEvent> events = alloc.trace().events();
  const nlohmann::json doc =
      nlohmann::json::parse(trace_to_json(alloc.trace(), "sim:0", "caching", memory.capacity()));
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

}  // TEST_SUITE("interop")
