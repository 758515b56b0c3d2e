// The policy table: one line per policy.
#include "allocator/policy_registry.h"

#include <fmt/format.h>

#include "allocator/caching_allocator.h"
#include "allocator/error.h"
#include "allocator/passthrough_allocator.h"

namespace memgrad {

std::unique_ptr<Allocator> make_allocator(const AllocatorConfig& config, MemorySource& source) {
  config.validate();
  std::unique_ptr<Allocator> allocator;
  if (config.policy == "caching") {
    allocator = std::make_unique<CachingAllocator>(source, config);
  } else if (config.policy == "passthrough") {
    allocator = std::make_unique<PassthroughAllocator>(source);
    if (config.memory_fraction != 1.0) allocator->set_memory_fraction(config.memory_fraction);
  } else {
    throw ConfigError(fmt::format("unknown allocator policy '{}' (known policies: {})",
                                  config.policy, known_policies()),
                      "policy", config.policy);
  }
  return allocator;
}

}  // namespace memgrad
