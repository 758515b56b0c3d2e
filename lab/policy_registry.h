// The policy table: every allocator policy memgrad knows, one entry each, and the allocator
// made from a configuration's policy name.
//
// An entry says all that the rest of the project needs of a policy: its name as
// MEMGRAD_ALLOC_CONF spells it, how to make one, which block a request gets, and which layout
// rules its snapshots keep. Config validation (make_allocator refuses unknown names, listing
// the known ones), `lab replay --policy all`, the training programs' --alloc-policy and both
// model-based tests (tests/lab/random_model.cpp, tests/support/allocator_invariants.cpp) read
// the table, so registering a policy is one line of policy_registry.cpp
// (docs/allocator-lab.md, "Write your own policy in one file").
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "allocator/config.h"
#include "allocator/policy_allocator.h"

namespace memgrad {

// The bytes of the block a request of n bytes gets: at least `min`, at most `max`.
struct BlockRange {
  size_t min = 0;
  size_t max = 0;
};

// The invariants a policy's snapshots and stats keep beyond blocks tiling their segments.
struct LayoutRules {
  bool coalesced = true;    // no two free blocks of a segment are neighbours
  bool split_stats = true;  // inactive_split stats count the free blocks of segments in use
};

// One policy.
struct PolicyEntry {
  std::string_view name;
  // A new allocator over `source` (not owned; it must outlive the allocator) with `config`'s
  // options. Throws as make_allocator says.
  std::unique_ptr<PolicyAllocator> (*make)(MemorySource& source, const AllocatorConfig& config);
  // The block a request of `nbytes` (1 to kMaxAllocationBytes) gets under `config`.
  BlockRange (*block_for)(size_t nbytes, const AllocatorConfig& config);
  LayoutRules layout;
};

// Every policy, the default (caching) first. Allocates: nothing.
std::span<const PolicyEntry> policy_table();

// The entry named `name`, or nullptr.
const PolicyEntry* find_policy(std::string_view name);

// The names of the table, in its order, joined by ", " ("caching, passthrough, ...").
const std::string& known_policies();

// Throws ConfigError (key "policy") when the table holds no policy named `config.policy`, naming
// the ones it holds.
void check_policy(const AllocatorConfig& config);

// A new allocator of `config.policy` over `source` (not owned; it must outlive the allocator).
// Throws ConfigError for an unknown policy (naming the known ones), out-of-range options, or a
// policy the source cannot serve (expandable on a source without expansion); IoError, PlanError
// or TraceError for a planned_plan file that cannot be read or planned from (it is read here).
std::unique_ptr<PolicyAllocator> make_allocator(const AllocatorConfig& config,
                                                MemorySource& source);

}  // namespace memgrad
