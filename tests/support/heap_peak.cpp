// The global operator new and delete, counting the bytes live and their peak (heap_peak.h).
// Each block counts at malloc_usable_size, which the sized and unsized deletes both know.
#include "tests/support/heap_peak.h"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<int64_t> live_bytes{0};
std::atomic<int64_t> peak_bytes{0};

void* counted_new(std::size_t nbytes) {
  void* p = std::malloc(nbytes == 0 ? 1 : nbytes);
  if (p == nullptr) throw std::bad_alloc();
  const int64_t live = live_bytes.fetch_add(static_cast<int64_t>(malloc_usable_size(p))) +
                       static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = peak_bytes.load(std::memory_order_relaxed);
  while (live > peak && !peak_bytes.compare_exchange_weak(peak, live)) {
  }
  return p;
}

void counted_delete(void* p) noexcept {
  if (p == nullptr) return;
  live_bytes.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)));
  std::free(p);
}

}  // namespace

void* operator new(std::size_t nbytes) { return counted_new(nbytes); }
void* operator new[](std::size_t nbytes) { return counted_new(nbytes); }
void* operator new(std::size_t nbytes, const std::nothrow_t&) noexcept {
  try {
    return counted_new(nbytes);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t nbytes, const std::nothrow_t& tag) noexcept {
  return operator new(nbytes, tag);
}
void operator delete(void* p) noexcept { counted_delete(p); }
void operator delete[](void* p) noexcept { counted_delete(p); }
void operator delete(void* p, std::size_t) noexcept { counted_delete(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_delete(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_delete(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_delete(p); }

namespace memgrad::testing {

int64_t heap_live_bytes() { return live_bytes.load(); }
int64_t heap_peak_bytes() { return peak_bytes.load(); }
void reset_heap_peak() { peak_bytes.store(live_bytes.load()); }

}  // namespace memgrad::testing
