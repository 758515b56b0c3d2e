// Structural invariants of an allocator's snapshot, shared by the randomized and stress tests.
//
// The checks return a description of the first violated invariant (empty when all hold) instead
// of asserting, so a test that runs them thousands of times fails once, with a message that
// names the segment, the block and the numbers, and adds no assertion per passing call.
//
// Every policy's snapshot is a list of segments tiled by blocks; what else holds depends on the
// policy (LayoutRules, from its entry in the policy table, lab/policy_registry.h): merging
// policies never leave two free blocks side by side, while buddy, size_class and arena do;
// expandable keeps its inactive_split stats at 0, as PyTorch does.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/policy_allocator.h"
#include "lab/policy_registry.h"

namespace memgrad::testing {

// The rules of the policy the table names `policy` (a policy outside the table: the defaults,
// those of the merging policies).
LayoutRules layout_rules_for(std::string_view policy);

// Sums over a snapshot, in bytes or counts.
struct SnapshotTotals {
  size_t segments = 0;
  size_t reserved = 0;        // sum of segment sizes
  size_t reserved_small = 0;  // ... of small-pool segments
  size_t reserved_large = 0;  // ... of large-pool segments
  size_t allocated_blocks = 0;
  size_t allocated = 0;       // sum of allocated block sizes
  size_t requested = 0;       // sum of allocated blocks' requested sizes
  size_t inactive_split = 0;  // free blocks inside segments that hold an allocated block
  size_t inactive_split_bytes = 0;
};

// Checks that segments are sorted by address and disjoint, that each segment's blocks tile it
// exactly (the first block at the segment's start, each next block where the previous one ends,
// sizes multiples of 512 summing to the segment's size), that no two free blocks are neighbours
// (when `rules.coalesced`), and that an allocated block's requested size is in [1, nbytes].
// Accumulates the sums into `totals`.
std::string check_snapshot_layout(const std::vector<SegmentSnapshot>& segments,
                                  SnapshotTotals& totals, const LayoutRules& rules = {});

// Checks that the snapshot's sums equal the stats: reserved (all and per pool), segment count,
// allocated bytes and count, requested bytes, inactive split blocks and bytes (when
// `rules.split_stats`; otherwise those stats must be 0). Valid when no block is waiting on
// another stream's event.
std::string check_totals_match_stats(const SnapshotTotals& totals, const MemoryStats& stats,
                                     const LayoutRules& rules = {});

// The names of the policy table, in its order (a test runs a SUBCASE per name).
std::vector<std::string> known_policy_names();

// Both checks, with the rules of the allocator's policy, on a fresh snapshot and stats of
// `allocator` (taken one after the other, so only when no other thread is allocating), filling
// `totals` when given.
std::string check_allocator(const PolicyAllocator& allocator, SnapshotTotals* totals = nullptr);

}  // namespace memgrad::testing
