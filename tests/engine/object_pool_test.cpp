// The per-thread free lists of small host objects (base/object_pool.h): reuse, the bound on what
// a thread keeps, what bypasses the lists, release at thread exit, and the tensors that use them.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "base/object_pool.h"
#include "engine/factories.h"
#include "engine/tensor.h"

namespace memgrad {
namespace {

constexpr size_t kSmall = 100;  // its class holds 112 bytes

TEST_CASE("object pool: an object freed is the next of its class made, on the same thread") {
  void* first = pool_allocate(kSmall, alignof(std::max_align_t));
  const size_t before = pool_cached_bytes();
  pool_deallocate(first, kSmall, alignof(std::max_align_t));
  if (!detail::kPoolEnabled) {  // AddressSanitizer: every call goes to the heap
    CHECK(pool_cached_bytes() == before);
    return;
  }
  CHECK(pool_cached_bytes() == before + 112);
  // Any size of the same 16-byte class takes it back.
  void* again = pool_allocate(kSmall + 12, alignof(std::max_align_t));
  CHECK(again == first);
  CHECK(pool_cached_bytes() == before);
  // Another class does not.
  void* other = pool_allocate(kSmall + 13, alignof(std::max_align_t));
  CHECK(other != first);
  pool_deallocate(other, kSmall + 13, alignof(std::max_align_t));
  pool_deallocate(again, kSmall + 12, alignof(std::max_align_t));
  CHECK(pool_cached_bytes() == before + 112 + 128);
}

TEST_CASE("object pool: large and over-aligned objects bypass the lists") {
  const size_t before = pool_cached_bytes();
  void* large = pool_allocate(kPoolMaxObjectBytes + 1, 16);
  pool_deallocate(large, kPoolMaxObjectBytes + 1, 16);
  void* aligned = pool_allocate(64, 64);
  CHECK(reinterpret_cast<uintptr_t>(aligned) % 64 == 0);
  pool_deallocate(aligned, 64, 64);
  CHECK(pool_cached_bytes() == before);
}

TEST_CASE("object pool: a thread keeps at most kPoolBytesPerThread") {
  if (!detail::kPoolEnabled) return;
  // More objects than the bound holds, freed at once: the lists stop at the bound and the rest
  // goes to the heap.
  std::vector<void*> objects(2 * kPoolBytesPerThread / kPoolMaxObjectBytes);
  for (void*& p : objects) p = pool_allocate(kPoolMaxObjectBytes, 16);
  for (void* p : objects) pool_deallocate(p, kPoolMaxObjectBytes, 16);
  CHECK(pool_cached_bytes() <= kPoolBytesPerThread);
  CHECK(pool_cached_bytes() > kPoolBytesPerThread - kPoolMaxObjectBytes);
  // Taking them again empties the lists down to what other classes hold.
  for (void*& p : objects) p = pool_allocate(kPoolMaxObjectBytes, 16);
  CHECK(pool_cached_bytes() < kPoolBytesPerThread / 2);
  for (void* p : objects) pool_deallocate(p, kPoolMaxObjectBytes, 16);
}

// Made before the thread's first pooled free, so destroyed after the pool's release at the
// thread's exit (thread_local objects are destroyed in reverse order of construction).
struct ExitProbe {
  std::atomic<size_t>* cached_after_release = nullptr;
  std::atomic<bool>* closed = nullptr;
  ~ExitProbe() {
    if (cached_after_release == nullptr) return;
    // A free after the release goes to the heap: nothing is kept.
    void* late = pool_allocate(kSmall, 16);
    pool_deallocate(late, kSmall, 16);
    cached_after_release->store(pool_cached_bytes());
    closed->store(detail::t_pool_lists.closed);
  }
};

TEST_CASE("object pool: a thread's lists go back to the heap when it exits") {
  if (!detail::kPoolEnabled) return;
  std::atomic<size_t> cached_in_thread{0};
  std::atomic<size_t> cached_after_release{1};
  std::atomic<bool> closed{false};
  std::thread worker([&] {
    thread_local ExitProbe probe;
    probe.cached_after_release = &cached_after_release;
    probe.closed = &closed;
    void* p = pool_allocate(kSmall, 16);
    pool_deallocate(p, kSmall, 16);
    cached_in_thread = pool_cached_bytes();
  });
  worker.join();
  CHECK(cached_in_thread.load() == 112);
  CHECK(closed.load());
  CHECK(cached_after_release.load() == 0);
}

TEST_CASE("object pool: an object freed on another thread joins that thread's lists") {
  if (!detail::kPoolEnabled) return;
  void* made_elsewhere = nullptr;
  std::thread maker([&] { made_elsewhere = pool_allocate(kSmall, 16); });
  maker.join();
  const size_t before = pool_cached_bytes();
  pool_deallocate(made_elsewhere, kSmall, 16);
  CHECK(pool_cached_bytes() == before + 112);
  CHECK(pool_allocate(kSmall, 16) == made_elsewhere);
  pool_deallocate(made_elsewhere, kSmall, 16);
}

TEST_CASE("object pool: an op's result reuses the tensor header and storage record freed before") {
  if (!detail::kPoolEnabled) return;
  const Tensor a = ones({1});
  const Tensor b = ones({1});
  Tensor c = a + b;
  const TensorImpl* impl = c.impl();
  const Storage* storage = &c.storage();
  c = Tensor();  // frees the header and the storage record (the block goes back to the cache)
  c = a + b;
  CHECK(c.impl() == impl);
  CHECK(&c.storage() == storage);
  CHECK(c.item<float>() == 2.0f);
}

}  // namespace
}  // namespace memgrad
