// The planned policy: the plan of a known step (exact offsets and arena), the step served from
// the arena with no source call, deviations counted and never overlapping a live planned block,
// the plan file's round trip and its typed errors, the warm-up, and the shipped traces replayed
// within 1.05x of their ideal peak.
//
// Addresses are offsets from the simulated device's base, so the arena, the first segment the
// policy obtains, starts at 0 unless the fallback obtained one before it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "allocator/bounded_memory.h"
#include "allocator/error.h"
#include "interop/trace_reader.h"
#include "lab/memory_plan.h"
#include "lab/plan_file.h"
#include "lab/policies/planned_allocator.h"
#include "lab/policy_registry.h"
#include "lab/trace_replay.h"
#include "tests/lab/random_model.h"
#include "tests/support/allocator_invariants.h"
#include "tests/support/caught.h"

using namespace memgrad;
using memgrad::testing::check_allocator;

namespace {

std::string trace_path(const std::string& name) {
  return std::string(MEMGRAD_SOURCE_ROOT) + "/traces/" + name;
}

// The step of the first tests: a0..a4 with ids 10*step + i; a4 outlives the step and is freed
// early in the next one (as a prefetched batch is).
//   alloc index: 0      1      2      3      4
//   bytes:       3072   1024   2048   5120   512 (requests 3000, 1000, 2048, 5000, 100)
//   freed before:2      4      4      4      (next step)
RecordedStep known_step(uint64_t step) {
  const auto id = [&](uint64_t i) { return 10 * step + i; };
  RecordedStep s;
  s.reserve(10);
  const auto alloc = [&](uint64_t i, size_t nbytes) { s.push_back({true, id(i), nbytes}); };
  const auto free = [&](uint64_t any_id) { s.push_back({false, any_id, 0}); };
  alloc(0, 3000);
  alloc(1, 1000);
  free(id(0));
  if (step > 0) free(10 * (step - 1) + 4);
  alloc(2, 2048);
  alloc(3, 5000);
  free(id(1));
  free(id(2));
  free(id(3));
  alloc(4, 100);
  return s;
}

// Runs the events of `step` on `alloc`, with blocks kept across steps by id.
void run_step(PolicyAllocator& alloc, const RecordedStep& step, std::map<uint64_t, Block>& live) {
  for (const StepEvent& e : step) {
    if (e.alloc) {
      live[e.id] = alloc.allocate(e.nbytes);
    } else if (auto it = live.find(e.id); it != live.end()) {
      alloc.free(it->second);
      live.erase(it);
    }
  }
}

// The first pair of live blocks that overlap, or "".
std::string overlap_in(const std::map<uint64_t, Block>& live) {
  std::vector<std::pair<uintptr_t, uintptr_t>> spans;
  for (const auto& [id, b] : live) {
    const auto at = reinterpret_cast<uintptr_t>(b.ptr);
    spans.emplace_back(at, at + b.nbytes);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) {
      return fmt::format("[{:#x}, {:#x}) overlaps [{:#x}, {:#x})", spans[i - 1].first,
                         spans[i - 1].second, spans[i].first, spans[i].second);
    }
  }
  return {};
}

// Writes `text` to a fresh file in the temp folder and returns its path.
std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

PlanError plan_error(const std::string& json) {
  try {
    plan_from_json(json, "bad.json");
  } catch (const PlanError& e) {
    return e;
  }
  FAIL("no PlanError for " << json);
  return PlanError("");
}

}  // namespace

TEST_SUITE("lab") {

TEST_CASE("a plan of a known step gives exact offsets, the ideal arena and no live overlap") {
  const MemoryPlan plan = plan_recording({known_step(0), known_step(1), known_step(2)}, 0);
  REQUIRE_EQ(plan.requests.size(), 5);
  const std::vector<size_t> nbytes = {3072, 1024, 2048, 5120, 512};
  const std::vector<uint32_t> free_before = {2, 4, 4, 4, PlannedRequest::kOutlives};
  // Greedy by size: 5120 at 0; 3072 at 0 too (freed before the 5120 is made); 2048 above the
  // 5120 it meets; 1024 above all three; the outliving 512 (the whole step) above everything.
  const std::vector<size_t> offsets = {0, 7168, 5120, 0, 8192};
  for (size_t k = 0; k < 5; ++k) {
    CAPTURE(k);
    CHECK_EQ(plan.requests[k].nbytes, nbytes[k]);
    CHECK_EQ(plan.requests[k].free_before, free_before[k]);
    REQUIRE_EQ(plan.requests[k].offsets.size(), 1);  // a4's instances never overlap: one copy
    CHECK_EQ(plan.requests[k].offsets[0], offsets[k]);
    CHECK_FALSE(plan.requests[k].one_time);  // later steps repeat every request
  }
  // Live at allocation 3: 1024 + 2048 + 5120 + the outliving 512 = 8704, the arena exactly.
  CHECK_EQ(plan.ideal_nbytes, 8704);
  CHECK_EQ(plan.arena_nbytes, 8704);
  CHECK_NOTHROW(check_plan(plan));
  // No two requests live at the same allocation index share a byte.
  for (uint32_t t = 0; t < 5; ++t) {
    for (size_t i = 0; i < 5; ++i) {
      for (size_t j = i + 1; j < 5; ++j) {
        const auto live_at = [&](size_t k) {
          const PlannedRequest& r = plan.requests[k];
          return r.outlives() || (k <= t && t < r.free_before);
        };
        if (!live_at(i) || !live_at(j)) continue;
        CAPTURE(t);
        CAPTURE(i);
        CAPTURE(j);
        const size_t a = plan.requests[i].offsets[0], b = plan.requests[j].offsets[0];
        CHECK((a + nbytes[i] <= b || b + nbytes[j] <= a));
      }
    }
  }
}

TEST_CASE("an outliving request gets a copy per instance live at once; first-step ones: one_time") {
  // Step 0 makes a 512 B block it never frees (optimizer state) and a batch that the step after
  // next frees; steps 1 and 2 make only the batch.
  std::vector<RecordedStep> steps(3);
  steps[0] = {{true, 1, 4096}, {true, 2, 512}, {false, 1, 0}, {true, 3, 1024}};
  steps[1] = {{true, 11, 4096}, {false, 11, 0}, {true, 13, 1024}};
  steps[2] = {{true, 21, 4096}, {false, 3, 0}, {false, 21, 0}, {true, 23, 1024}};
  const MemoryPlan plan = plan_recording(steps, 0);
  REQUIRE_EQ(plan.requests.size(), 3);
  CHECK(plan.requests[1].one_time);
  CHECK_EQ(plan.requests[1].offsets.size(), 1);
  CHECK_FALSE(plan.requests[2].one_time);
  CHECK_EQ(plan.requests[2].offsets.size(), 2);  // batches of steps 0 and 1 live at once
  CHECK_EQ(plan.arena_nbytes, 4096 + 512 + 2 * 1024);
  CHECK_NOTHROW(check_plan(plan));
}

TEST_CASE("later steps are aligned on size and context, so first-step state is told apart") {
  // Step 0 makes the next batch (512 B, freed in the next step) and then optimizer state made
  // once (two 512 B zeros); later steps make only the batch. On size alone the batch of a later
  // step would be aligned with the last zeros (the latest of equal keys), the batch taken for
  // state made once.
  const uint64_t fwd = context_tag("forward", "linear");
  const uint64_t state = context_tag("optimizer", "zeros");
  const uint64_t batch = context_tag("", "to");
  CHECK_NE(state, batch);
  CHECK_NE(context_tag("ab", ""), context_tag("a", "b"));
  const auto step = [&](uint64_t t) {
    const uint64_t id = 10 * t;
    RecordedStep s;
    if (t > 0) s.push_back({false, id - 10 + 3, 0, 0});
    s.push_back({true, id, 4096, fwd});
    s.push_back({false, id, 0, 0});
    s.push_back({true, id + 3, 512, batch});
    if (t == 0) {
      s.push_back({true, id + 1, 512, state});
      s.push_back({true, id + 2, 512, state});
    }
    return s;
  };
  const MemoryPlan plan = plan_recording({step(0), step(1), step(2)}, 0);
  REQUIRE_EQ(plan.requests.size(), 4);
  CHECK_FALSE(plan.requests[1].one_time);
  CHECK(plan.requests[2].one_time);
  CHECK(plan.requests[3].one_time);
  BoundedMemory memory(64 * kMiB, "sim:0");
  PlannedAllocator alloc(memory, plan);
  std::map<uint64_t, Block> live;
  for (uint64_t t = 0; t < 4; ++t) run_step(alloc, step(t), live);
  const PlannedCounts c = alloc.planned_counts();
  CHECK_EQ(c.deviations(), 0);
  CHECK_EQ(c.planned, 4 + 3 * 2);
  CHECK_EQ(c.steps, 4);
  for (auto& [id, b] : live) alloc.free(b);
}

TEST_CASE("a step that repeats the plan is served from the arena with no source call") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  PlannedAllocator alloc(memory, plan_recording({known_step(0), known_step(1)}, 0));
  std::map<uint64_t, Block> live;
  for (uint64_t step = 0; step < 4; ++step) {
    CAPTURE(step);
    run_step(alloc, known_step(step), live);
    CHECK_MESSAGE(overlap_in(live).empty(), overlap_in(live));
    CHECK_MESSAGE(check_allocator(alloc).empty(), check_allocator(alloc));
  }
  const MemoryStats s = alloc.stats();
  CHECK_EQ(s.num_device_alloc, 1);  // the arena, at the first request; nothing after it
  CHECK_EQ(s.segment.all().current, 1);
  CHECK_EQ(s.reserved_bytes.all().current, 8704);
  const PlannedCounts c = alloc.planned_counts();
  CHECK_EQ(c.planned, 20);
  CHECK_EQ(c.deviations(), 0);
  CHECK_EQ(c.unplanned, 0);
  CHECK_EQ(c.steps, 4);
  // The planned blocks are where the plan put them.
  const uint64_t base = memory.address_base();
  CHECK_EQ(reinterpret_cast<uintptr_t>(live.at(34).ptr) - base, 8192);
  for (auto& [id, b] : live) alloc.free(b);
  alloc.empty_cache();
  CHECK_EQ(memory.bytes_in_use(), 0);
}

TEST_CASE("a deviating request falls back, is counted, and never overlaps a live planned block") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  PlannedAllocator alloc(memory, plan_recording({known_step(0), known_step(1)}, 0));
  std::map<uint64_t, Block> live;
  run_step(alloc, known_step(0), live);
  const uint64_t base = memory.address_base();
  const auto in_arena = [&](const Block& b) {
    return reinterpret_cast<uintptr_t>(b.ptr) - base < 8704;
  };
  SUBCASE("a request of another size") {
    RecordedStep s = known_step(1);
    s[4].nbytes = 3000;  // request 2 (2048 B) becomes 3000 B: no planned request of 3072 B near
    run_step(alloc, s, live);
    CHECK_EQ(alloc.planned_counts().mismatch, 1);
    CHECK_EQ(alloc.planned_counts().planned, 5 + 4);
  }
  SUBCASE("a block kept past its planned free") {
    // a0 stays live through the step: from request 2 on, every planned request waits for it.
    RecordedStep s = known_step(1);
    s.erase(s.begin() + 2);                                         // the free of a0
    run_step(alloc, RecordedStep(s.begin(), s.begin() + 4), live);  // up to the alloc of a2
    REQUIRE(live.count(10));
    CHECK(in_arena(live.at(10)));
    CHECK(!in_arena(live.at(12)));  // 2048 B at 5120 would not overlap a0, but the rule is strict
    run_step(alloc, RecordedStep(s.begin() + 4, s.end()), live);
    CHECK_EQ(alloc.planned_counts().late_free, 3);  // requests 2, 3 and 4 of the step
    CHECK_MESSAGE(overlap_in(live).empty(), overlap_in(live));
    alloc.free(live.at(10));
    live.erase(10);
    run_step(alloc, known_step(2), live);  // a new step begins: served again
    CHECK_EQ(alloc.planned_counts().planned, 5 + 2 + 5);
  }
  SUBCASE("an outliving block whose only copy is still live") {
    RecordedStep s = known_step(1);
    s.erase(s.begin() + 3);  // the batch of step 0 is not freed
    run_step(alloc, s, live);
    CHECK_EQ(alloc.planned_counts().copies_busy, 1);
    CHECK(!in_arena(live.at(14)));
  }
  SUBCASE("a request on another stream") {
    const Block b = alloc.allocate(3000, 1);
    CHECK(!in_arena(b));
    CHECK_EQ(alloc.planned_counts().other_stream, 1);
    alloc.free(b);
  }
  CHECK_MESSAGE(overlap_in(live).empty(), overlap_in(live));
  CHECK_MESSAGE(check_allocator(alloc).empty(), check_allocator(alloc));
  for (auto& [id, b] : live) alloc.free(b);
  alloc.empty_cache();
  CHECK_EQ(memory.bytes_in_use(), 0);
}

TEST_CASE("perturbed steps never get overlapping blocks and keep the stats exact") {
  // A random step (sizes and lifetimes) is planned, then served 300 times with random changes:
  // sizes changed, requests dropped or added, frees made early or late (into the next step).
  std::mt19937_64 rng(20260);
  const auto pick = [&](size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(rng);
  };
  const auto base_step = [&](uint64_t first_id) {
    RecordedStep s;
    std::vector<uint64_t> open;
    for (uint64_t i = 0; i < 40; ++i) {
      s.push_back({true, first_id + i, pick(0, 3) == 0 ? pick(1, 600000) : 512 * pick(1, 8)});
      open.push_back(first_id + i);
      while (!open.empty() && pick(0, 2) == 0) {
        const size_t at = pick(0, open.size() - 1);
        s.push_back({false, open[at], 0});
        open.erase(open.begin() + static_cast<ptrdiff_t>(at));
      }
    }
    for (size_t i = 0; i + 2 < open.size(); ++i) s.push_back({false, open[i], 0});
    return s;  // the last two stay live: outliving
  };
  const RecordedStep plan_step = base_step(0);
  BoundedMemory memory(256 * kMiB, "sim:0");
  PlannedAllocator alloc(memory, plan_recording({plan_step}, 0));
  std::map<uint64_t, Block> live;
  std::vector<uint64_t> late;  // frees pushed into the next step
  for (uint64_t step = 0; step < 300; ++step) {
    CAPTURE(step);
    const uint64_t shift = 1000 * (step + 1);
    uint64_t extras = 0;
    for (uint64_t id : late) {
      alloc.free(live.at(id));
      live.erase(id);
    }
    late.clear();
    for (StepEvent e : plan_step) {
      e.id += shift;
      const size_t dice = pick(0, 99);
      if (e.alloc && dice < 3) continue;                      // dropped (its free finds nothing)
      if (e.alloc && dice < 6) e.nbytes += 512 * pick(1, 4);  // another size
      if (e.alloc && dice < 9) live[shift + 900 + extras++] = alloc.allocate(pick(1, 9000));
      if (!e.alloc && dice < 2 && live.count(e.id) > 0) {
        late.push_back(e.id);  // freed at the start of the next step
        continue;
      }
      if (e.alloc) {
        live[e.id] = alloc.allocate(e.nbytes);
      } else if (auto it = live.find(e.id); it != live.end()) {
        alloc.free(it->second);
        live.erase(it);
      }
      REQUIRE_MESSAGE(overlap_in(live).empty(), overlap_in(live));
    }
    // Blocks that outlived their step go one step later (as batches do), the extras now.
    for (auto it = live.begin(); it != live.end();) {
      const bool old = it->first < shift;
      const bool extra = it->first % 1000 >= 900;
      if (old || extra) {
        alloc.free(it->second);
        it = live.erase(it);
      } else {
        ++it;
      }
    }
    REQUIRE_MESSAGE(check_allocator(alloc).empty(), check_allocator(alloc));
  }
  const PlannedCounts c = alloc.planned_counts();
  CAPTURE(c.planned);
  CAPTURE(c.mismatch);
  CAPTURE(c.late_free);
  CHECK_GT(c.planned, 300 * 40 / 2);  // most requests come from the plan
  CHECK_GT(c.mismatch, 0);            // and every kind of deviation happened
  CHECK_GT(c.late_free, 0);
  CHECK_GT(c.steps, 250);
  for (auto& [id, b] : live) alloc.free(b);
  alloc.empty_cache();
  CHECK_EQ(memory.bytes_in_use(), 0);
}

TEST_CASE("the randomized model run holds with a plan of its own first steps") {
  // The plan: the run's first 400 steps as recorded by the caching policy (one step: the trace has
  // no phases). The run then starts on the plan and deviates from it after that.
  BoundedMemory recording_memory(testing::kRandomModelCapacity, "sim:0");
  std::unique_ptr<PolicyAllocator> recorder =
      make_allocator(AllocatorConfig::parse("policy:caching"), recording_memory);
  recorder->trace().enable();
  const testing::RandomModelResult prefix =
      testing::run_random_model(*recorder, recording_memory, 400);
  REQUIRE(prefix.problem.empty());
  RecordedTrace trace;
  trace.events = recorder->trace().events();
  trace.contexts = recorder->trace().contexts();
  const MemoryPlan plan = plan_trace(trace, "random prefix");
  BoundedMemory memory(testing::kRandomModelCapacity, "sim:0");
  PlannedAllocator alloc(memory, plan);
  testing::check_random_model(alloc, memory);
  CHECK_GT(alloc.planned_counts().planned, 100);
}

TEST_CASE("a plan round-trips through its JSON file and a trace is planned from its first step") {
  const MemoryPlan plan = plan_recording({known_step(0), known_step(1)}, 0);
  const std::string path = temp_file("memgrad_plan_roundtrip.json", plan_to_json(plan));
  const MemoryPlan back = read_plan_file(path);
  CHECK_EQ(back.arena_nbytes, plan.arena_nbytes);
  CHECK_EQ(back.ideal_nbytes, plan.ideal_nbytes);
  CHECK_EQ(back.steps_recorded, 2);
  REQUIRE_EQ(back.requests.size(), plan.requests.size());
  for (size_t k = 0; k < plan.requests.size(); ++k) {
    CAPTURE(k);
    CHECK_EQ(back.requests[k].nbytes, plan.requests[k].nbytes);
    CHECK_EQ(back.requests[k].free_before, plan.requests[k].free_before);
    CHECK_EQ(back.requests[k].one_time, plan.requests[k].one_time);
    CHECK(back.requests[k].offsets == plan.requests[k].offsets);
  }
  CHECK_EQ(plan_to_json(back), plan_to_json(plan));
  // Through the configuration, as MEMGRAD_ALLOC_CONF gives it.
  BoundedMemory memory(64 * kMiB, "sim:0");
  std::unique_ptr<PolicyAllocator> alloc =
      make_allocator(AllocatorConfig::parse("policy:planned,planned_plan:" + path), memory);
  const auto* planned = dynamic_cast<const PlannedAllocator*>(alloc.get());
  REQUIRE(planned != nullptr);
  REQUIRE(planned->plan().has_value());
  CHECK_EQ(planned->plan()->arena_nbytes, 8704);
  std::remove(path.c_str());
  // A trace: its first step (from the first "forward" allocation to the next one).
  const MemoryPlan mlp = read_plan_file(trace_path("mlp_step.json"));
  CHECK_EQ(mlp.steps_recorded, 3);
  CHECK_EQ(mlp.planned_step, 0);
  CHECK_EQ(mlp.requests.size(), 41);
  CHECK_GE(mlp.arena_nbytes, mlp.ideal_nbytes);
}

TEST_CASE("bad plan files are typed errors naming the field") {
  CHECK_THROWS_AS(read_plan_file("/nonexistent/plan.json"), IoError);
  const std::optional<PlanError> not_json =
      memgrad::testing::caught<PlanError>([] { (void)plan_from_json("[1, 2", "p.json"); });
  REQUIRE(not_json);
  CHECK_EQ(not_json->path, "p.json");
  CHECK_EQ(not_json->field, "(document)");
  CHECK_EQ(plan_error("{\"requests\": []}").field, "memgrad_plan");
  CHECK_EQ(plan_error("{\"memgrad_plan\": 2}").field, "memgrad_plan");
  const std::string head =
      "{\"memgrad_plan\": 1, \"steps_recorded\": 1, \"planned_step\": 0, \"ideal_nbytes\": 1024, ";
  CHECK_EQ(plan_error(head + "\"arena_nbytes\": 1024}").field, "requests");
  CHECK_EQ(plan_error(head + "\"arena_nbytes\": -5, \"requests\": []}").field, "arena_nbytes");
  CHECK_EQ(plan_error(head + "\"arena_nbytes\": 1000, \"requests\": [{\"nbytes\": 512, "
                             "\"offsets\": [0]}]}")
               .field,
           "arena_nbytes");
  CHECK_EQ(plan_error(head + "\"arena_nbytes\": 1024, \"requests\": [{\"offsets\": [0]}]}").field,
           "requests[0].nbytes");
  CHECK_EQ(plan_error(head + "\"arena_nbytes\": 1024, \"requests\": [{\"nbytes\": 512, "
                             "\"free_before\": 0, \"offsets\": [0]}]}")
               .field,
           "requests[0].free_before");
  CHECK_EQ(plan_error(head + "\"arena_nbytes\": 1024, \"requests\": [{\"nbytes\": 512, "
                             "\"offsets\": [\"x\"]}]}")
               .field,
           "requests[0].offsets[0]");
  CHECK_EQ(plan_error(head + "\"arena_nbytes\": 1024, \"requests\": [{\"nbytes\": 512, "
                             "\"offsets\": [768]}]}")
               .field,
           "requests[0].offsets");
  // Two requests live at once in the same bytes: the file would hand out overlapping blocks.
  const PlanError overlap =
      plan_error(head +
                 "\"arena_nbytes\": 1024, \"requests\": [{\"nbytes\": 1024, \"free_before\": 2, "
                 "\"offsets\": [0]}, {\"nbytes\": 512, \"free_before\": 2, \"offsets\": [512]}]}");
  CHECK_EQ(overlap.field, "requests[1].offsets");
  CHECK_EQ(overlap.path, "bad.json");
  CHECK(std::string(overlap.what()).find("overlaps") != std::string::npos);
  // Neither a plan nor a trace, through the configuration.
  const std::string path = temp_file("memgrad_plan_bad.json", "{\"hello\": 1}");
  BoundedMemory memory(64 * kMiB, "sim:0");
  CHECK_THROWS_AS(
      make_allocator(AllocatorConfig::parse("policy:planned,planned_plan:" + path), memory),
      PlanError);
  std::remove(path.c_str());
}

TEST_CASE("without a plan the policy records its warm-up steps exactly, then serves the plan") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  PlannedAllocator alloc(memory, AllocatorConfig::parse("policy:planned,planned_warmup_steps:2"));
  std::map<uint64_t, Block> live;
  const Block before = alloc.allocate(4096);  // not in a step: never planned
  for (uint64_t step = 0; step < 5; ++step) {
    CAPTURE(step);
    const RecordedStep s = known_step(step);
    {
      TracePhaseScope forward("forward");
      run_step(alloc, RecordedStep(s.begin(), s.begin() + 2), live);
    }
    TracePhaseScope backward("backward");
    run_step(alloc, RecordedStep(s.begin() + 2, s.end()), live);
    CHECK_EQ(alloc.plan().has_value(), step >= 2);
  }
  const PlannedCounts c = alloc.planned_counts();
  CHECK_EQ(c.unplanned, 1 + 2 * 5);  // the first block and two warm-up steps
  CHECK_EQ(c.planned, 3 * 5);
  CHECK_EQ(c.deviations(), 0);
  CHECK_EQ(alloc.plan()->source, "warm-up");
  CHECK_EQ(alloc.plan()->arena_nbytes, 8704);
  CHECK_MESSAGE(check_allocator(alloc).empty(), check_allocator(alloc));
  // The requests before the plan had segments of their own, each returned at its free (the batch
  // of the last warm-up step too, freed in the first planned step): what stays is the arena and
  // the segment of the first block, its own 4096 bytes (caching would hold 2 MiB for it).
  CHECK_EQ(alloc.memory_reserved(), 8704 + 4096);
  alloc.free(before);
  for (auto& [id, b] : live) alloc.free(b);
  alloc.empty_cache();
  CHECK_EQ(memory.bytes_in_use(), 0);
}

TEST_CASE("the training traces replay on their plan within 1.05x of the ideal peak") {
  for (const std::string name : {"mlp_step.json", "charlm_step.json"}) {
    CAPTURE(name);
    const RecordedTrace trace = read_trace_file(trace_path(name));
    const ReplayPlan requests = plan_replay(trace.events);
    PlannedCounts counts;
    ReplayOptions options;
    options.inspect = [&](const PolicyAllocator& a) {
      counts = dynamic_cast<const PlannedAllocator&>(a).planned_counts();
    };
    const ReplayResult r =
        replay(requests, AllocatorConfig::parse("policy:planned,planned_plan:" + trace_path(name)),
               256 * kMiB, options);
    CHECK_FALSE(r.oom);
    CHECK_EQ(r.allocs, requests.allocs);
    CHECK_EQ(counts.deviations(), 0);
    CHECK_EQ(counts.planned, static_cast<int64_t>(requests.allocs));
    CHECK_EQ(r.stats.num_device_alloc, 1);  // the arena, and nothing else
    CHECK_LE(static_cast<double>(r.peak_reserved), 1.05 * static_cast<double>(requests.ideal_peak));
  }
}

TEST_CASE("mutated plan files are read and served without overlap, or refused with a PlanError") {
  // A bounded fuzzer of the plan reader: bytes changed, numbers replaced by extreme ones, files
  // cut short. Each mutant is a PlanError, or a plan whose blocks never overlap while two steps
  // run on it (a request the device cannot hold is an OutOfMemoryError, which is allowed).
  const std::string good = plan_to_json(plan_recording({known_step(0), known_step(1)}, 0));
  std::vector<size_t> numbers;  // where each number of the file starts
  for (size_t i = 0; i < good.size(); ++i) {
    const bool starts = (std::isdigit(static_cast<unsigned char>(good[i])) || good[i] == '-') &&
                        (i == 0 || !std::isdigit(static_cast<unsigned char>(good[i - 1])));
    if (starts) numbers.push_back(i);
  }
  REQUIRE(numbers.size() > 10);
  const char* extremes[] = {"-1",
                            "0",
                            "1",
                            "4611686018427387904",
                            "9223372036854775807",
                            "18446744073709551615",
                            "1e300",
                            "0.5",
                            "-9223372036854775808",
                            "99999999999999999999999"};
  const std::string bytes = "0123456789-e.{}[],\":x ";
  std::mt19937_64 rng(27);
  const auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  size_t refused = 0, served = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string text = good;
    switch (round % 3) {
      case 0:
        for (int k = 0; k < 1 + round % 4; ++k) text[pick(text.size())] = bytes[pick(bytes.size())];
        break;
      case 1: {
        const size_t at = numbers[pick(numbers.size())];
        size_t end = at + 1;
        while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
        text.replace(at, end - at, extremes[pick(std::size(extremes))]);
        break;
      }
      default: text.resize(pick(text.size())); break;
    }
    CAPTURE(text);
    std::optional<MemoryPlan> plan;
    try {
      plan = plan_from_json(text, "mutant.json");
    } catch (const PlanError&) {
      ++refused;
      continue;
    }
    ++served;
    BoundedMemory memory(64 * kMiB, "sim:0");
    PlannedAllocator alloc(memory, std::move(*plan));
    std::map<uint64_t, Block> live;
    try {
      for (uint64_t step = 0; step < 2; ++step) {
        run_step(alloc, known_step(step), live);
        REQUIRE_EQ(overlap_in(live), "");
      }
    } catch (const OutOfMemoryError&) {
    }
    for (auto& [id, block] : live) alloc.free(block);
    CHECK_EQ(alloc.memory_allocated(), 0);
  }
  MESSAGE(refused << " mutants refused, " << served << " served");
  CHECK_GT(refused, 10000);
  CHECK_GT(served, 300);
}

TEST_CASE("plans of huge requests do not overflow; files that never end are refused") {
  // Eight live requests of 2^60 bytes: 2^63 at once, past int64 but within size_t.
  RecordedStep eight;
  for (uint64_t i = 0; i < 8; ++i) eight.push_back({true, i, size_t{1} << 60});
  const MemoryPlan plan = plan_recording({eight}, 0);
  CHECK_EQ(plan.ideal_nbytes, size_t{1} << 63);
  CHECK_EQ(plan.arena_nbytes, size_t{1} << 63);
  // Sixteen: 2^64, which no size_t holds.
  RecordedStep sixteen;
  for (uint64_t i = 0; i < 16; ++i) sixteen.push_back({true, i, size_t{1} << 60});
  CHECK_THROWS_WITH_AS(plan_recording({sixteen}, 0), doctest::Contains("more than 2^64 bytes"),
                       PlanError);
  // /dev/zero would be read for ever.
  CHECK_THROWS_WITH_AS(read_plan_file("/dev/zero"), doctest::Contains("is not a regular file"),
                       IoError);
}

}  // TEST_SUITE("lab")
