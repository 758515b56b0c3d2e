// Four threads allocating and freeing on one allocator at once, for every policy.
//
// Each thread keeps its own live blocks and stamps the first and last 8 bytes of each with a tag
// unique to that allocation; a tag found changed at free time means two threads were handed
// overlapping memory. While they run, one thread empties the cache now and then and another
// checks snapshot invariants (a snapshot is taken under the allocator's lock, so it must be
// consistent at any moment). After the join the totals must balance exactly. Each policy of
// known_policies() runs as its own SUBCASE, and planned once more with a plan (without one it stays
// in its warm-up, on its caching fallback).
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "allocator/bounded_memory.h"
#include "allocator/error.h"
#include "interop/trace_reader.h"
#include "lab/memory_plan.h"
#include "lab/policies/planned_allocator.h"
#include "lab/policy_registry.h"
#include "lab/trace_replay.h"
#include "tests/support/allocator_invariants.h"

using namespace memgrad;
using memgrad::testing::check_snapshot_layout;
using memgrad::testing::known_policy_names;
using memgrad::testing::layout_rules_for;
using memgrad::testing::SnapshotTotals;

namespace {

constexpr int kThreads = 4;
constexpr int kStepsPerThread = 50'000;
constexpr size_t kCapacity = 512 * kMiB;
constexpr size_t kMaxLivePerThread = 48;
constexpr int kPlannedSteps = 4000;  // thread 0's steps recorded for the planned policy's plan

// 60% tiny (1..4096 B), 35% medium (up to 1 MiB), 5% large (1..12 MiB).
size_t draw_size(std::mt19937_64& rng) {
  const auto pick = [&](size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(rng);
  };
  const size_t kind = pick(0, 99);
  if (kind < 60) return pick(1, 4096);
  if (kind < 95) return pick(4097, kMiB);
  return pick(kMiB + 1, 12 * kMiB);
}

void stamp(const Block& b, uint64_t tag) {
  auto* bytes = static_cast<unsigned char*>(b.ptr);
  std::memcpy(bytes, &tag, sizeof tag);
  std::memcpy(bytes + b.nbytes - sizeof tag, &tag, sizeof tag);
}

bool stamp_intact(const Block& b, uint64_t tag) {
  const auto* bytes = static_cast<const unsigned char*>(b.ptr);
  uint64_t head = 0;
  uint64_t tail = 0;
  std::memcpy(&head, bytes, sizeof head);
  std::memcpy(&tail, bytes + b.nbytes - sizeof tail, sizeof tail);
  return head == tag && tail == tag;
}

// What one thread did and the first problem it saw.
struct ThreadResult {
  int64_t allocs = 0;
  int64_t frees = 0;
  int64_t ooms = 0;
  int64_t requested = 0;  // sum of requested bytes over all successful allocations
  std::string problem;
};

struct Live {
  Block block;
  uint64_t tag;
};

void worker(PolicyAllocator& alloc, int id, ThreadResult& result, int steps = kStepsPerThread) {
  const LayoutRules rules = layout_rules_for(alloc.policy_name());
  std::mt19937_64 rng(1000 + static_cast<uint64_t>(id));
  std::vector<Live> live;
  uint64_t serial = 0;
  const auto free_one = [&](size_t i) {
    if (!stamp_intact(live[i].block, live[i].tag) && result.problem.empty()) {
      result.problem = fmt::format("thread {}: block at {} was overwritten by another owner", id,
                                   live[i].block.ptr);
    }
    alloc.free(live[i].block);
    live[i] = live.back();
    live.pop_back();
    ++result.frees;
  };
  for (int step = 0; step < steps; ++step) {
    const bool allocate = live.empty() || (live.size() < kMaxLivePerThread && rng() % 2 == 0);
    if (allocate) {
      const size_t nbytes = draw_size(rng);
      try {
        const Block b = alloc.allocate(nbytes);
        const uint64_t tag = (static_cast<uint64_t>(id) << 56) | ++serial;
        stamp(b, tag);
        live.push_back({b, tag});
        ++result.allocs;
        result.requested += static_cast<int64_t>(nbytes);
      } catch (const OutOfMemoryError&) {
        ++result.ooms;
      }
    } else {
      free_one(std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng));
    }
    if (id == 0 && step % 1000 == 999) alloc.empty_cache();
    if (id == 1 && step % 500 == 499 && result.problem.empty()) {
      SnapshotTotals totals;
      const std::string problem = check_snapshot_layout(alloc.snapshot(), totals, rules);
      if (!problem.empty()) result.problem = fmt::format("thread 1, step {}: {}", step, problem);
    }
  }
  while (!live.empty()) free_one(live.size() - 1);
}

}  // namespace

TEST_SUITE("lab") {

TEST_CASE("four threads sharing one allocator never overlap and leave exact totals") {
  std::string policy;
  bool with_plan = false;
  for (const std::string& name : known_policy_names()) {
    SUBCASE(name.c_str()) { policy = name; }
  }
  SUBCASE("planned, on a plan of thread 0's first requests") {
    policy = "planned";
    with_plan = true;
  }
  CAPTURE(policy);
  CAPTURE(with_plan);
  BoundedMemory memory(kCapacity, "sim:0");
  AllocatorConfig config;
  config.policy = policy;
  std::unique_ptr<PolicyAllocator> owner;
  if (with_plan) {
    // Thread 0's first requests, alone under caching, are the plan's one step; with four threads
    // the sequence is interleaved, so requests go to the arena and to the fallback at once.
    BoundedMemory recording_memory(kCapacity, "sim:0");
    std::unique_ptr<PolicyAllocator> recorder = make_allocator(AllocatorConfig{}, recording_memory);
    recorder->trace().enable();
    ThreadResult ignored;
    worker(*recorder, 0, ignored, kPlannedSteps);
    RecordedTrace trace;
    trace.events = recorder->trace().events();
    trace.contexts = recorder->trace().contexts();
    owner = std::make_unique<PlannedAllocator>(memory, plan_trace(trace, "thread 0"));
  } else {
    owner = make_allocator(config, memory);
  }
  PolicyAllocator& alloc = *owner;
  std::vector<ThreadResult> results(kThreads);
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) {
    ThreadResult& result = results[static_cast<size_t>(id)];
    threads.emplace_back([&alloc, id, &result] { worker(alloc, id, result); });
  }
  for (std::thread& t : threads) t.join();

  int64_t allocs = 0;
  int64_t requested = 0;
  for (const ThreadResult& r : results) {
    CHECK_MESSAGE(r.problem.empty(), r.problem);
    CHECK_EQ(r.frees, r.allocs);
    allocs += r.allocs;
    requested += r.requested;
  }
  CHECK_GT(allocs, kThreads * kStepsPerThread / 3);
  if (with_plan) CHECK_GT(dynamic_cast<PlannedAllocator&>(alloc).planned_counts().planned, 1000);

  const MemoryStats s = alloc.stats();
  CHECK_EQ(s.allocation.all().current, 0);
  CHECK_EQ(s.allocation.all().allocated, allocs);
  CHECK_EQ(s.allocation.all().freed, allocs);
  CHECK_EQ(s.allocated_bytes.all().current, 0);
  CHECK_EQ(s.allocated_bytes.all().allocated, s.allocated_bytes.all().freed);
  CHECK_EQ(s.active.all().current, 0);
  CHECK_EQ(s.active_bytes.all().current, 0);
  CHECK_EQ(s.requested_bytes.all().current, 0);
  CHECK_EQ(s.requested_bytes.all().allocated, requested);
  CHECK_EQ(s.inactive_split_bytes.all().current, 0);

  SnapshotTotals totals;
  const std::string problem =
      check_snapshot_layout(alloc.snapshot(), totals, layout_rules_for(policy));
  CHECK_MESSAGE(problem.empty(), problem);
  CHECK_EQ(static_cast<int64_t>(totals.reserved), s.reserved_bytes.all().current);
  CHECK_EQ(static_cast<int64_t>(totals.segments), s.segment.all().current);
  CHECK_EQ(memory.bytes_in_use(), totals.reserved);

  alloc.empty_cache();
  CHECK_EQ(alloc.memory_reserved(), 0);
  CHECK_EQ(alloc.stats().segment.all().current, 0);
  CHECK_EQ(memory.bytes_in_use(), 0);
}

}  // TEST_SUITE("lab")
