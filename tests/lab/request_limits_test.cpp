// Requests near 2^64 under every policy: each is refused with a typed OutOfMemoryError before
// any policy rounds it (a round-up that wrapped to 0 once handed out a 0-byte block at another
// tensor's address), the stats and the source stay untouched, and the allocator keeps working.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "allocator/bounded_memory.h"
#include "allocator/config.h"
#include "allocator/error.h"
#include "allocator/host_memory.h"
#include "allocator/pinned_host_allocator.h"
#include "lab/policy_registry.h"
#include "tests/support/allocator_invariants.h"

using namespace memgrad;
using memgrad::testing::known_policy_names;

namespace {

// Sizes a wrapped computation produces: just above the limit, (2^62 - 1) rounded by a policy,
// a negative int64 read as unsigned, and the largest size_t.
const size_t kAbsurdSizes[] = {kMaxAllocationBytes + 1, (size_t{1} << 62) - 1,
                               static_cast<size_t>(int64_t{-4096}),
                               std::numeric_limits<size_t>::max()};

// A fresh allocator of the policy `name` over `source`.
std::unique_ptr<PolicyAllocator> policy_over(const std::string& name, MemorySource& source) {
  AllocatorConfig config;
  config.policy = name;
  return make_allocator(config, source);
}

void check_refuses_absurd_sizes(PolicyAllocator& alloc) {
  Block keep = alloc.allocate(4096);
  std::memset(keep.ptr, 0x5a, 4096);
  const MemoryStats before = alloc.stats();
  const size_t reserved = alloc.memory_reserved();
  for (size_t nbytes : kAbsurdSizes) {
    CAPTURE(nbytes);
    try {
      (void)alloc.allocate(nbytes);
      FAIL("an absurd request was served");
    } catch (const OutOfMemoryError& e) {
      CHECK(e.info().too_large);
      CHECK_EQ(e.requested(), nbytes);
      CHECK(std::string(e.what()).find("more than 1 EiB") != std::string::npos);
    }
  }
  // Nothing counted, nothing reserved, and the next block does not alias the kept one.
  CHECK_EQ(alloc.stats().num_ooms, before.num_ooms);
  CHECK_EQ(alloc.stats().allocation.all().allocated, before.allocation.all().allocated);
  CHECK_EQ(alloc.memory_reserved(), reserved);
  Block next = alloc.allocate(4096);
  CHECK(next.ptr != keep.ptr);
  std::memset(next.ptr, 0x11, 4096);
  CHECK_EQ(static_cast<const unsigned char*>(keep.ptr)[4095], 0x5a);
  alloc.free(next);
  alloc.free(keep);
}

}  // namespace

TEST_SUITE("lab") {

TEST_CASE("every policy refuses requests above 1 EiB before rounding them") {
  for (const std::string& name : known_policy_names()) {
    SUBCASE(name.c_str()) {
      BoundedMemory source(64 * kMiB, "sim:0");
      check_refuses_absurd_sizes(*policy_over(name, source));
    }
  }
  SUBCASE("pinned_host") {
    BoundedMemory source(64 * kMiB, "sim:0");
    PinnedHostAllocator alloc(source);
    check_refuses_absurd_sizes(alloc);
  }
}

TEST_CASE("every policy answers a request larger than the device with a counted OOM") {
  // Below the 1 EiB guard the policy itself decides: rounding these must not overflow either.
  const size_t sizes[] = {64 * kMiB + 1, size_t{1} << 40, kMaxAllocationBytes,
                          kMaxAllocationBytes - 1};
  for (const std::string& name : known_policy_names()) {
    SUBCASE(name.c_str()) {
      BoundedMemory source(64 * kMiB, "sim:0");
      std::unique_ptr<PolicyAllocator> alloc = policy_over(name, source);
      int64_t ooms = 0;
      for (size_t nbytes : sizes) {
        CAPTURE(nbytes);
        CHECK_THROWS_AS((void)alloc->allocate(nbytes), OutOfMemoryError);
        CHECK_EQ(alloc->stats().num_ooms, ++ooms);
        CHECK_EQ(alloc->memory_allocated(), 0);
      }
      Block b = alloc->allocate(kMiB);
      CHECK_EQ(alloc->memory_allocated(), b.nbytes);
      alloc->free(b);
    }
  }
}

TEST_CASE("host memory refuses a request larger than the machine without asking the C library") {
  // The C library's answer to a 4 TiB malloc varies (nullptr, an overcommitted pointer, or, under
  // AddressSanitizer, an abort): the source answers first, and every policy turns its nullptr
  // into a counted OOM that names the machine's memory.
  const size_t physical = physical_host_bytes();
  HostMemory host;
  CHECK_EQ(host.allocate(physical + 1), nullptr);
  CHECK_EQ(host.bytes_in_use(), 0);
  for (const std::string& name : known_policy_names()) {
    SUBCASE(name.c_str()) {
      std::unique_ptr<PolicyAllocator> alloc = policy_over(name, host);
      for (size_t nbytes : {physical + 4096, size_t{4} << 40}) {
        CAPTURE(nbytes);
        try {
          (void)alloc->allocate(nbytes);
          FAIL("a request larger than the machine was served");
        } catch (const OutOfMemoryError& e) {
          CHECK_FALSE(e.info().too_large);
          CHECK_EQ(e.info().capacity, physical);
        }
      }
      CHECK_EQ(alloc->stats().num_ooms, 2);
      CHECK_EQ(alloc->memory_allocated(), 0);
      CHECK_EQ(host.bytes_in_use(), 0);
    }
  }
}

}  // TEST_SUITE("lab")
