// Creating an allocator policy by name, as MEMGRAD_ALLOC_CONF selects it. The names are those of
// known_policies(): caching (the default), passthrough, and the policy lab's first_fit, buddy,
// size_class, arena, expandable, stitch and planned (docs/allocator-lab.md).
#pragma once

#include <memory>

#include "allocator/config.h"
#include "allocator/policy_allocator.h"

namespace memgrad {

// A new allocator of `config.policy` over `source` (not owned; it must outlive the allocator).
// Throws ConfigError for an unknown policy, out-of-range options, or a policy the source cannot
// serve (expandable on a source without expansion); IoError, PlanError or TraceError for a
// planned_plan file that cannot be read or planned from.
std::unique_ptr<PolicyAllocator> make_allocator(const AllocatorConfig& config,
                                                MemorySource& source);

}  // namespace memgrad
