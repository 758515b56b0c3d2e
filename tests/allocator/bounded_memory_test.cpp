// BoundedMemory, the simulated device: a hard byte budget, first-fit addresses relative to its
// base, coalescing of freed ranges, and pages handed back to the kernel on free.
#include <doctest/doctest.h>

#include <cstring>
#include <utility>

#include "allocator/bounded_memory.h"
#include "allocator/config.h"
#include "allocator/error.h"

using namespace memgrad;

namespace {

uint64_t offset(const BoundedMemory& m, const void* p) {
  return reinterpret_cast<uintptr_t>(p) - m.address_base();
}

}  // namespace

TEST_SUITE("allocator") {

TEST_CASE("bounded memory returns nullptr, not an exception, past its capacity") {
  BoundedMemory m(4 * kMiB, "sim:0");
  void* a = m.allocate(3 * kMiB);
  REQUIRE_NE(a, nullptr);
  CHECK_EQ(m.allocate(kMiB + 512), nullptr);  // 3 MiB + 1 MiB + 512 B > 4 MiB
  CHECK_EQ(m.bytes_in_use(), 3 * kMiB);
  CHECK_EQ(m.free_bytes(), kMiB);
  void* b = m.allocate(kMiB);  // exactly up to the capacity
  REQUIRE_NE(b, nullptr);
  CHECK_EQ(m.free_bytes(), 0);
  CHECK_EQ(m.allocate(1), nullptr);
  m.free(a, 3 * kMiB);
  m.free(b, kMiB);
}

TEST_CASE("bounded memory rounds every range up to 512 bytes and free returns them") {
  BoundedMemory m(kMiB, "sim:0");
  void* a = m.allocate(1);
  void* b = m.allocate(513);
  CHECK_EQ(m.bytes_in_use(), 512 + 1024);
  CHECK_EQ(offset(m, b), 512);
  m.free(a, 1);
  CHECK_EQ(m.bytes_in_use(), 1024);
  m.free(b, 513);
  CHECK_EQ(m.bytes_in_use(), 0);
  CHECK_EQ(m.free_bytes(), kMiB);
  CHECK_EQ(m.allocate(0), nullptr);
  CHECK_EQ(m.bytes_in_use(), 0);
}

TEST_CASE("bounded memory hands out addresses first fit from its base") {
  BoundedMemory m(16 * kMiB, "sim:0");
  void* a = m.allocate(kMiB);
  void* b = m.allocate(kMiB);
  void* c = m.allocate(kMiB);
  CHECK_EQ(offset(m, a), 0);
  CHECK_EQ(offset(m, b), kMiB);
  CHECK_EQ(offset(m, c), 2 * kMiB);
  m.free(b, kMiB);
  void* d = m.allocate(kMiB / 2);  // into the hole b left
  CHECK_EQ(offset(m, d), kMiB);
  void* e = m.allocate(kMiB);  // the rest of the hole is too small: after c
  CHECK_EQ(offset(m, e), 3 * kMiB);
  void* f = m.allocate(kMiB / 4);  // the first range that fits is the rest of the hole
  CHECK_EQ(offset(m, f), kMiB + kMiB / 2);
  for (auto [p, n] : {std::pair{a, kMiB}, {c, kMiB}, {d, kMiB / 2}, {e, kMiB}, {f, kMiB / 4}}) {
    m.free(p, n);
  }
  // Freed ranges merged back into one: the whole capacity fits at the base again.
  void* all = m.allocate(16 * kMiB);
  CHECK_EQ(offset(m, all), 0);
  m.free(all, 16 * kMiB);
}

TEST_CASE("two bounded memories give the same relative addresses for the same requests") {
  BoundedMemory m1(8 * kMiB, "sim:0");
  BoundedMemory m2(8 * kMiB, "sim:1");
  CHECK_NE(m1.address_base(), m2.address_base());
  void* a1 = m1.allocate(3000);
  void* a2 = m2.allocate(3000);
  void* b1 = m1.allocate(kMiB);
  void* b2 = m2.allocate(kMiB);
  CHECK_EQ(offset(m1, a1), offset(m2, a2));
  CHECK_EQ(offset(m1, b1), offset(m2, b2));
  CHECK_EQ(offset(m1, b1), 3072);
  m1.free(a1, 3000);
  m1.free(b1, kMiB);
  m2.free(a2, 3000);
  m2.free(b2, kMiB);
}

TEST_CASE("bounded memory is real host memory and freed pages read as zero when reused") {
  BoundedMemory m(kMiB, "sim:0");
  CHECK(m.host_accessible());
  CHECK_EQ(m.alignment(), 512);
  CHECK_EQ(m.name(), "sim:0");
  CHECK_EQ(m.capacity(), kMiB);
  constexpr size_t n = 64 * kKiB;
  auto* p = static_cast<unsigned char*>(m.allocate(n));
  REQUIRE_NE(p, nullptr);
  std::memset(p, 0xAB, n);
  CHECK_EQ(p[n - 1], 0xAB);
  m.free(p, n);
  // The whole pages of a freed range go back to the kernel (MADV_DONTNEED), so the same range
  // handed out again reads as fresh zero pages.
  auto* q = static_cast<unsigned char*>(m.allocate(n));
  REQUIRE_EQ(q, p);
  CHECK_EQ(q[0], 0);
  CHECK_EQ(q[n - 1], 0);
  m.free(q, n);
}

TEST_CASE("bounded memory follows recorded placements until the first request that differs") {
  BoundedMemory memory(64 * kMiB, "sim:0");
  const auto offset = [&](void* p) {
    return reinterpret_cast<uintptr_t>(p) - memory.address_base();
  };
  // Recorded: 2 MiB at 40 MiB, 20 MiB at 0, 1000 bytes (rounded to 1024) at 30 MiB, then 4 MiB
  // at 50 MiB.
  memory.follow_placements(
      {{40 * kMiB, 2 * kMiB}, {0, 20 * kMiB}, {30 * kMiB, 1000}, {50 * kMiB, 4 * kMiB}});
  void* a = memory.allocate(2 * kMiB);
  void* b = memory.allocate(20 * kMiB);
  void* c = memory.allocate(1024);
  CHECK_EQ(offset(a), 40 * kMiB);
  CHECK_EQ(offset(b), 0);
  CHECK_EQ(offset(c), 30 * kMiB);
  CHECK_EQ(memory.bytes_in_use(), 22 * kMiB + 1024);
  // A request of another size ends the list: first fit (right after b), and so for the rest.
  void* d = memory.allocate(8 * kMiB);
  CHECK_EQ(offset(d), 20 * kMiB);
  void* e = memory.allocate(4 * kMiB);
  CHECK_NE(offset(e), 50 * kMiB);
  // The capacity still decides: 64 MiB in all.
  CHECK_EQ(memory.allocate(40 * kMiB), nullptr);
  for (auto [p, n] :
       {std::pair{a, 2 * kMiB}, {b, 20 * kMiB}, {c, size_t{1024}}, {d, 8 * kMiB}, {e, 4 * kMiB}}) {
    memory.free(p, n);
  }
  CHECK_EQ(memory.bytes_in_use(), 0);
  // A place already taken ends the list too.
  void* f = memory.allocate(kMiB);  // at 0
  memory.follow_placements({{0, kMiB}});
  void* g = memory.allocate(kMiB);
  CHECK_EQ(offset(g), kMiB);
  memory.free(f, kMiB);
  memory.free(g, kMiB);
}

TEST_CASE("a bounded memory of zero capacity is a ConfigError") {
  CHECK_THROWS_WITH_AS(BoundedMemory(0, "sim:0"), doctest::Contains("capacity must be > 0"),
                       ConfigError);
}

}  // TEST_SUITE("allocator")
