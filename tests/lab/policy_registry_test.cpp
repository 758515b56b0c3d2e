// The policy table: make_allocator builds each policy by its name with the configuration's
// options, and refuses a name the table does not hold, listing the ones it does.
#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "allocator/bounded_memory.h"
#include "allocator/config.h"
#include "allocator/error.h"
#include "lab/policy_registry.h"

using namespace memgrad;

TEST_SUITE("lab") {

TEST_CASE("make_allocator builds the passthrough policy with the configured fraction") {
  BoundedMemory memory(8 * kMiB, "sim:0");
  std::unique_ptr<PolicyAllocator> alloc = make_allocator(
      AllocatorConfig::parse("policy:passthrough,per_process_memory_fraction:0.25"), memory);
  CHECK_EQ(alloc->policy_name(), "passthrough");
  CHECK_THROWS_AS(alloc->allocate(3 * kMiB), OutOfMemoryError);  // 3 MiB > 0.25 x 8 MiB
  Block b = alloc->allocate(2 * kMiB);
  CHECK_EQ(alloc->memory_reserved(), 2 * kMiB);
  alloc->free(b);
}

TEST_CASE("an unknown policy is a ConfigError listing the known ones") {
  BoundedMemory memory(8 * kMiB, "sim:0");
  const AllocatorConfig config = AllocatorConfig::parse("policy:tlsf");
  CHECK_THROWS_AS(check_policy(config), ConfigError);
  CHECK_THROWS_WITH_AS(make_allocator(config, memory), doctest::Contains("unknown policy 'tlsf'"),
                       ConfigError);
  try {
    make_allocator(config, memory);
    FAIL("make_allocator accepted policy:tlsf");
  } catch (const ConfigError& e) {
    CHECK_EQ(e.key, "policy");
    CHECK_EQ(e.value, "tlsf");
    CHECK(std::string(e.what()).find(known_policies()) != std::string::npos);
  }
}

}  // TEST_SUITE("lab")
