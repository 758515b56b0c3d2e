// The policy table: one line per policy. The caching and passthrough policies live at the top of
// allocator/; the policy lab's live in allocator/policies/.
#include "allocator/policy_registry.h"

#include <fmt/format.h>

#include "allocator/caching_allocator.h"
#include "allocator/error.h"
#include "allocator/passthrough_allocator.h"
#include "allocator/policies/arena_allocator.h"
#include "allocator/policies/buddy_allocator.h"
#include "allocator/policies/expandable_allocator.h"
#include "allocator/policies/first_fit_allocator.h"
#include "allocator/policies/planned_allocator.h"
#include "allocator/policies/size_class_allocator.h"

namespace memgrad {

std::unique_ptr<PolicyAllocator> make_allocator(const AllocatorConfig& config,
                                                MemorySource& source) {
  config.validate();
  const std::string& p = config.policy;
  std::unique_ptr<PolicyAllocator> allocator;
  if (p == "caching") {
    allocator = std::make_unique<CachingAllocator>(source, config);
  } else if (p == "passthrough") {
    allocator = std::make_unique<PassthroughAllocator>(source, config);
  } else if (p == "first_fit") {
    allocator = std::make_unique<FirstFitAllocator>(source, config);
  } else if (p == "buddy") {
    allocator = std::make_unique<BuddyAllocator>(source, config);
  } else if (p == "size_class") {
    allocator = std::make_unique<SizeClassAllocator>(source, config);
  } else if (p == "arena") {
    allocator = std::make_unique<ArenaAllocator>(source, config);
  } else if (p == "expandable") {
    allocator = std::make_unique<ExpandableAllocator>(source, config);
  } else if (p == "stitch") {
    allocator = std::make_unique<ExpandableAllocator>(source, config,
                                                      ExpandableAllocator::Stitch());
  } else if (p == "planned") {
    allocator = std::make_unique<PlannedAllocator>(source, config);
  } else {
    throw ConfigError(fmt::format("unknown allocator policy '{}' (known policies: {})", p,
                                  known_policies()),
                      "policy", p);
  }
  return allocator;
}

}  // namespace memgrad
