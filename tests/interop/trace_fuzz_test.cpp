// A mutation fuzzer over the trace reader, in bounded time: thousands of corrupted copies of a
// real trace are read, planned, replayed and drawn. Each either works or throws a memgrad
// error; none crashes, hangs or throws anything else (the sanitizer build runs this too).
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>

#include "allocator/bounded_memory.h"
#include "allocator/caching_allocator.h"
#include "allocator/config.h"
#include "allocator/error.h"
#include "allocator/trace.h"
#include "interop/error.h"
#include "interop/trace_reader.h"
#include "interop/trace_svg.h"
#include "interop/trace_writer.h"
#include "lab/trace_replay.h"
#include "tests/support/caught.h"

using namespace memgrad;

namespace {

// A small real trace: a few dozen allocations and frees of assorted sizes, some left live.
std::string recorded_trace() {
  BoundedMemory memory(kGiB, "sim:0");
  CachingAllocator alloc(memory);
  alloc.trace().enable();
  std::vector<Block> live;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 40; ++i) {
    live.push_back(alloc.allocate(1 + rng() % (3 * kMiB)));
    if (i % 3 == 2) {
      alloc.free(live.front());
      live.erase(live.begin());
    }
  }
  std::string json =
      trace_to_json(alloc.trace(), memory.name(), alloc.policy_name(), memory.capacity());
  for (const Block& b : live) alloc.free(b);
  return json;
}

// One random change: a byte replaced by one that twists JSON or numbers, a span deleted, a span
// repeated, or the text cut.
std::string mutate(const std::string& text, std::mt19937_64& rng) {
  static const std::string kBytes = "0123456789-+.eE\"{}[],: \x00\xff";
  std::string out = text;
  if (out.empty()) return "{";  // a first mutation that cut everything: nothing to pick from
  const size_t pos = rng() % out.size();
  switch (rng() % 4) {
    case 0: out[pos] = kBytes[rng() % kBytes.size()]; break;
    case 1: out.erase(pos, 1 + rng() % 16); break;
    case 2: out.insert(pos, out.substr(pos, 1 + rng() % 32)); break;
    default: out.resize(pos);
  }
  return out;
}

}  // namespace

TEST_SUITE("interop") {

TEST_CASE("corrupted traces are read, replayed and drawn, or refused with a memgrad error") {
  const std::string valid = recorded_trace();
  REQUIRE_NOTHROW(parse_trace(valid));
  std::mt19937_64 rng(2026);
  int refused = 0, replayed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = mutate(valid, rng);
    if (i % 5 == 0) text = mutate(text, rng);
    CAPTURE(i);
    try {
      const RecordedTrace trace = parse_trace(text);
      const ReplayPlan plan = plan_replay(trace.events);
      AllocatorConfig config;
      config.policy = i % 2 == 0 ? "caching" : "first_fit";
      const size_t capacity =
          std::min(std::max<size_t>(4 * plan.ideal_peak, 64 * kMiB), BoundedMemory::kMaxCapacity);
      if (plan.ideal_peak <= BoundedMemory::kMaxCapacity / 4) {
        (void)replay(plan, config, capacity);
        ++replayed;
      }
      (void)trace_to_svg(trace.events, trace.contexts, "fuzz", capacity);
    } catch (const Error&) {
      ++refused;
    } catch (const std::exception& e) {
      FAIL("a mutated trace threw a non-memgrad exception: " << e.what());
    }
  }
  CHECK(refused > 0);
  CHECK(replayed > 0);
}

TEST_CASE("negative, oversized and backward values in a trace are TraceErrors naming the field") {
  const std::string valid = recorded_trace();
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = valid;
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
  };
  // "requested" of the first event, read as unsigned, once became 2^64 - 4096.
  const size_t at = valid.find("\"requested\":");
  REQUIRE(at != std::string::npos);
  const std::string first = valid.substr(at, valid.find_first_of(",}", at) - at);
  for (const char* bad : {"\"requested\":-4096", "\"requested\":1152921504606846977"}) {
    CAPTURE(bad);
    const std::optional<TraceError> e =
        memgrad::testing::caught<TraceError>([&] { (void)parse_trace(with(first, bad)); });
    REQUIRE(e);
    CHECK_EQ(e->place, "memgrad_events[0]");
    CHECK_EQ(e->field, "requested");
  }
  CHECK_THROWS_WITH_AS(parse_trace(with(first, "\"requested\":1152921504606846977")),
                       doctest::Contains("expected an integer in [0, 1152921504606846976]"),
                       TraceError);
  CHECK_THROWS_AS(parse_trace(with(first, "\"requested\":1.5")), TraceError);
  CHECK_THROWS_AS(parse_trace(with(first, "\"requested\":\"12\"")), TraceError);
  CHECK_THROWS_AS(parse_trace("[]"), TraceError);
  CHECK_THROWS_AS(parse_trace("{\"memgrad_events\": 3, \"contexts\": []}"), TraceError);
}

}  // TEST_SUITE("interop")
