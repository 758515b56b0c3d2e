// The policy table: one line per policy. The caching, passthrough and pinned host policies live
// in allocator/ (the core); the lab's live in lab/policies/.
#include "lab/policy_registry.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include <fmt/format.h>

#include "allocator/caching_allocator.h"
#include "allocator/error.h"
#include "allocator/passthrough_allocator.h"
#include "lab/plan_file.h"
#include "lab/policies/arena_allocator.h"
#include "lab/policies/buddy_allocator.h"
#include "lab/policies/expandable_allocator.h"
#include "lab/policies/first_fit_allocator.h"
#include "lab/policies/planned_allocator.h"
#include "lab/policies/size_class_allocator.h"

namespace memgrad {
namespace {

template <typename Policy>
std::unique_ptr<PolicyAllocator> make(MemorySource& source, const AllocatorConfig& config) {
  return std::make_unique<Policy>(source, config);
}

std::unique_ptr<PolicyAllocator> make_stitch(MemorySource& source, const AllocatorConfig& config) {
  return std::make_unique<ExpandableAllocator>(source, config, ExpandableAllocator::Stitch());
}

// planned_plan names a file to read (a plan, a trace or a snapshot); without one the policy
// records its plan during a warm-up.
std::unique_ptr<PolicyAllocator> make_planned(MemorySource& source, const AllocatorConfig& config) {
  if (config.planned_plan.empty()) return std::make_unique<PlannedAllocator>(source, config);
  return std::make_unique<PlannedAllocator>(source, read_plan_file(config.planned_plan), config);
}

// Every request rounded up to 512 bytes, exactly.
BlockRange rounded_512(size_t nbytes, const AllocatorConfig&) {
  const size_t rounded = (nbytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
  return {rounded, rounded};
}

BlockRange buddy_block(size_t nbytes, const AllocatorConfig&) {
  const size_t block = BuddyAllocator::block_size(nbytes);
  return {block, block};
}

BlockRange size_class_block(size_t nbytes, const AllocatorConfig&) {
  const size_t block = SizeClassAllocator::class_size(nbytes);
  return {block, block};
}

// The caching rounding. A small-pool block is never larger (a rest of >= 512 bytes is always
// split off); a large one at most 1 MiB larger (the split threshold), or for requests of
// max_split_size and up, less than max_non_split_rounding_size larger (an oversize block reused
// whole).
BlockRange caching_block(size_t nbytes, const AllocatorConfig& config) {
  const size_t rounded = CachingAllocator::round_size(nbytes, config);
  if (rounded <= kSmallSize) return {rounded, rounded};
  const size_t slack =
      rounded >= config.max_split_size ? config.max_non_split_rounding_size - 1 : kSmallSize;
  return {rounded, rounded + std::min(slack, SIZE_MAX - rounded)};
}

// The planned policy's arena blocks are 512-byte rounded; its fallback's follow caching.
BlockRange planned_block(size_t nbytes, const AllocatorConfig& config) {
  return {rounded_512(nbytes, config).min, caching_block(nbytes, config).max};
}

constexpr LayoutRules kMerging{.coalesced = true, .split_stats = true};
constexpr LayoutRules kNeverMerging{.coalesced = false, .split_stats = true};
// Expandable segments keep inactive_split at 0, as PyTorch's do.
constexpr LayoutRules kExpandable{.coalesced = true, .split_stats = false};

constexpr std::array<PolicyEntry, 9> kPolicies = {{
    {"caching", make<CachingAllocator>, caching_block, kMerging},
    {"passthrough", make<PassthroughAllocator>, rounded_512, kMerging},
    {"first_fit", make<FirstFitAllocator>, rounded_512, kMerging},
    {"buddy", make<BuddyAllocator>, buddy_block, kNeverMerging},
    {"size_class", make<SizeClassAllocator>, size_class_block, kNeverMerging},
    {"arena", make<ArenaAllocator>, rounded_512, kNeverMerging},
    {"expandable", make<ExpandableAllocator>, rounded_512, kExpandable},
    {"stitch", make_stitch, rounded_512, kExpandable},
    {"planned", make_planned, planned_block, kMerging},
}};

}  // namespace

std::span<const PolicyEntry> policy_table() { return kPolicies; }

const PolicyEntry* find_policy(std::string_view name) {
  for (const PolicyEntry& entry : kPolicies) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

const std::string& known_policies() {
  static const std::string names = [] {
    std::string out;
    for (const PolicyEntry& entry : kPolicies) {
      out += out.empty() ? "" : ", ";
      out += entry.name;
    }
    return out;
  }();
  return names;
}

void check_policy(const AllocatorConfig& config) {
  if (find_policy(config.policy) != nullptr) return;
  throw ConfigError(fmt::format("MEMGRAD_ALLOC_CONF: unknown policy '{}' (known policies: {})",
                                config.policy, known_policies()),
                    "policy", config.policy);
}

std::unique_ptr<PolicyAllocator> make_allocator(const AllocatorConfig& config,
                                                MemorySource& source) {
  check_policy(config);
  config.validate();
  return find_policy(config.policy)->make(source, config);
}

}  // namespace memgrad
