// Model-based randomized tests: every built-in policy through the seeded run of random_model.h.
//
// Every policy of known_policies() runs the same sequence (a SUBCASE per name, so a new policy is
// covered as soon as it is registered), plus caching and expandable variants. The run, the model
// and what differs per policy (the block a request must get, the shape of its segments, what may
// stay cached after empty_cache) are in random_model.cpp, so a policy written elsewhere (see
// example_policy_test.cpp) runs the same check.
#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "allocator/bounded_memory.h"
#include "lab/policy_registry.h"
#include "tests/lab/random_model.h"
#include "tests/support/allocator_invariants.h"

using namespace memgrad;
using memgrad::testing::check_random_model;
using memgrad::testing::known_policy_names;
using memgrad::testing::kRandomModelCapacity;

TEST_SUITE("lab") {

TEST_CASE("a random alloc/free sequence keeps blocks disjoint and stats exact under every policy") {
  std::string conf;
  for (const std::string& name : known_policy_names()) {
    SUBCASE(name.c_str()) { conf = "policy:" + name; }
  }
  SUBCASE("caching with max_split_size and power-of-two rounding") {
    conf = "max_split_size_mb:32,roundup_power2_divisions:4";
  }
  SUBCASE("caching with a memory fraction and garbage collection") {
    conf = "per_process_memory_fraction:0.75,garbage_collection_threshold:0.6";
  }
  SUBCASE("expandable with a memory fraction") {
    conf = "policy:expandable,per_process_memory_fraction:0.75";
  }
  CAPTURE(conf);
  BoundedMemory memory(kRandomModelCapacity, "sim:0");
  std::unique_ptr<PolicyAllocator> alloc = make_allocator(AllocatorConfig::parse(conf), memory);
  check_random_model(*alloc, memory);
}

}  // TEST_SUITE("lab")
