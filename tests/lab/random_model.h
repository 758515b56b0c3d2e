// The model-based randomized test, as a check any policy instance can run (the built-in
// policies in randomized_model_test.cpp, a new policy in its own test file).
//
// 100,000 seeded alloc/free steps are checked against a reference model: the set of live blocks
// (address -> block) and the sums of their sizes. After every step the allocator must agree with
// it exactly: live blocks never overlap, allocated_bytes, requested_bytes and the allocation
// count equal the model's, and the source holds exactly the reserved bytes. Every 1000 steps and
// at the end the whole snapshot is checked too: blocks tile their segments, free neighbours were
// merged, the snapshot's sums equal the stats and its allocated blocks are exactly the model's.
// The device is small (256 MiB) next to the requests (up to 40 MiB), so OOMs are part of every
// run and must leave everything consistent. One step in 200 calls empty_cache, and one request
// in 10 goes to a second stream.
//
// What differs per policy comes from its entry in the policy table (lab/policy_registry.h): the
// block a request must get and the layout rules of its snapshots; random_model.cpp adds, keyed
// by policy_name(), the shape of the built-in policies' segments and what may stay cached after
// empty_cache. A policy outside the table must round requests to 512 bytes exactly, coalesce its
// free blocks and keep the inactive_split stats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "allocator/bounded_memory.h"
#include "allocator/config.h"
#include "allocator/policy_allocator.h"

namespace memgrad::testing {

// The capacity of the simulated device a run expects (bytes), and the steps of a full run.
inline constexpr size_t kRandomModelCapacity = 256 * kMiB;
inline constexpr int kRandomModelSteps = 100'000;

// Counts of what a run did, so a test can require that the interesting paths were taken.
struct RunCounts {
  int64_t allocs = 0;
  int64_t frees = 0;
  int64_t ooms = 0;
  int64_t empty_caches = 0;
  int64_t full_checks = 0;
};

// What a run found: the first broken invariant (empty when none) and what it did.
struct RandomModelResult {
  std::string problem;
  RunCounts counts;
};

// Runs `steps` random steps on `allocator` (fresh, over `memory`, a BoundedMemory of
// kRandomModelCapacity), then frees every live block, checking after each step. Stops at the
// first problem. Allocates: up to the device's capacity, all freed again unless a check failed.
RandomModelResult run_random_model(PolicyAllocator& allocator, const BoundedMemory& memory,
                                   int steps = kRandomModelSteps);

// The whole test, as doctest checks: a full run without a problem that reached many blocks,
// OOMs, cache flushes and a retry (a source call per block for passthrough), then nothing
// allocated, balanced totals, and after empty_cache nothing reserved and an empty snapshot.
void check_random_model(PolicyAllocator& allocator, const BoundedMemory& memory);

}  // namespace memgrad::testing
