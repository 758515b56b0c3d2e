// Creating an allocator policy by name, as MEMGRAD_ALLOC_CONF selects it.
#pragma once

#include <memory>

#include "allocator/allocator.h"
#include "allocator/config.h"

namespace memgrad {

// A new allocator of `config.policy` over `source` (not owned; it must outlive the allocator).
// Throws ConfigError for an unknown policy or out-of-range options.
std::unique_ptr<Allocator> make_allocator(const AllocatorConfig& config, MemorySource& source);

}  // namespace memgrad
