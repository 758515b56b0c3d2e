// Per-thread free lists for the small host objects every op makes and destroys: tensor headers
// (TensorImpl), storage records, autograd nodes and their metadata.
//
// A 1-element op recorded for backward makes about eight such objects and destroys as many one
// iteration later. Through glibc's malloc each pair costs about 150 instructions, a fifth of the
// op (docs/performance.md, "Where the overhead goes"). Here a freed object goes on its thread's
// list for its size class (16-byte classes up to 1 KiB) and the next object of that class takes
// it back: a handful of instructions each way, no lock, no atomic.
//
// The memory a thread's lists hold is bounded: at most kPoolBytesPerThread in all. Beyond that,
// for objects above kPoolMaxObjectBytes and for over-aligned ones, memory goes straight to
// operator new and delete. A thread's lists go back to the heap when the thread exits; an object
// freed after that (a thread_local destroyed later) goes to the heap at once. An object may be
// freed on another thread than the one that made it: it joins that thread's lists.
//
// Only host bookkeeping goes through here. Tensor data always comes from the device's allocator
// (allocator/), whose every byte is counted. Under AddressSanitizer every call passes straight
// through, so a use after free is still caught.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>

namespace memgrad {

inline constexpr size_t kPoolClassBytes = 16;
inline constexpr size_t kPoolMaxObjectBytes = 1024;
inline constexpr size_t kPoolBytesPerThread = 256 * 1024;

namespace detail {

#if defined(__SANITIZE_ADDRESS__)  // GCC
#define MEMGRAD_POOL_OFF 1
#elif defined(__has_feature)  // Clang
#if __has_feature(address_sanitizer)
#define MEMGRAD_POOL_OFF 1
#endif
#endif
#ifdef MEMGRAD_POOL_OFF
inline constexpr bool kPoolEnabled = false;
#undef MEMGRAD_POOL_OFF
#else
inline constexpr bool kPoolEnabled = true;
#endif

// One thread's lists. Trivially destructible, so it stays usable while the thread's other
// thread_local objects are destroyed; `closed` turns it off once its memory went back.
struct PoolLists {
  struct FreeObject {
    FreeObject* next;
  };
  static constexpr size_t kClasses = kPoolMaxObjectBytes / kPoolClassBytes + 1;
  std::array<FreeObject*, kClasses> heads{};
  size_t cached_bytes = 0;
  bool registered = false;  // its release at thread exit is arranged
  bool closed = false;      // the thread's lists went back to the heap
};
inline thread_local PoolLists t_pool_lists;

// Arranges the release of this thread's lists at its exit (on the first object kept).
void pool_register_release();

// The size class of `nbytes` (0 < nbytes <= kPoolMaxObjectBytes); its objects hold
// class x kPoolClassBytes.
constexpr size_t pool_class(size_t nbytes) {
  return (nbytes + kPoolClassBytes - 1) / kPoolClassBytes;
}

constexpr bool pooled(size_t nbytes, size_t align) {
  return kPoolEnabled && nbytes > 0 && nbytes <= kPoolMaxObjectBytes &&
         align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__;
}

}  // namespace detail

// `nbytes` of memory aligned to `align`: an object of its class this thread freed last, or new
// memory. Throws std::bad_alloc as operator new does.
inline void* pool_allocate(size_t nbytes, size_t align) {
  if (!detail::pooled(nbytes, align)) {
    return align > __STDCPP_DEFAULT_NEW_ALIGNMENT__
               ? ::operator new(nbytes, std::align_val_t(align))
               : ::operator new(nbytes);
  }
  const size_t cls = detail::pool_class(nbytes);
  detail::PoolLists& lists = detail::t_pool_lists;
  if (detail::PoolLists::FreeObject* object = lists.heads[cls]) {
    lists.heads[cls] = object->next;
    lists.cached_bytes -= cls * kPoolClassBytes;
    return object;
  }
  return ::operator new(cls* kPoolClassBytes);
}

// Returns memory pool_allocate(nbytes, align) gave.
inline void pool_deallocate(void* ptr, size_t nbytes, size_t align) noexcept {
  if (ptr == nullptr) return;
  if (!detail::pooled(nbytes, align)) {
    if (align > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      ::operator delete(ptr, nbytes, std::align_val_t(align));
    } else {
      ::operator delete(ptr, nbytes);
    }
    return;
  }
  const size_t cls = detail::pool_class(nbytes);
  const size_t bytes = cls * kPoolClassBytes;
  detail::PoolLists& lists = detail::t_pool_lists;
  if (lists.closed || lists.cached_bytes + bytes > kPoolBytesPerThread) [[unlikely]] {
    ::operator delete(ptr, bytes);
    return;
  }
  if (!lists.registered) [[unlikely]]
    detail::pool_register_release();
  auto* object = static_cast<detail::PoolLists::FreeObject*>(ptr);
  object->next = lists.heads[cls];
  lists.heads[cls] = object;
  lists.cached_bytes += bytes;
}

// The bytes this thread's lists hold now (at most kPoolBytesPerThread).
inline size_t pool_cached_bytes() { return detail::t_pool_lists.cached_bytes; }

// A standard allocator over the pool, for std::allocate_shared and containers.
template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>& /*other*/) noexcept {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(pool_allocate(n * sizeof(T), alignof(T)));
  }
  void deallocate(T* ptr, size_t n) noexcept { pool_deallocate(ptr, n * sizeof(T), alignof(T)); }
  template <class U>
  bool operator==(const PoolAllocator<U>& /*other*/) const noexcept {
    return true;
  }
};

// std::make_shared through the pool: the object and its reference counts in one pooled block.
template <class T, class... Args>
std::shared_ptr<T> make_pooled(Args&&... args) {
  return std::allocate_shared<T>(PoolAllocator<T>(), std::forward<Args>(args)...);
}

// new and delete through the pool, for objects a plain pointer owns.
template <class T, class... Args>
T* pool_new(Args&&... args) {
  void* memory = pool_allocate(sizeof(T), alignof(T));
  try {
    return new (memory) T(std::forward<Args>(args)...);
  } catch (...) {
    pool_deallocate(memory, sizeof(T), alignof(T));
    throw;
  }
}
template <class T>
void pool_delete(T* object) noexcept {
  if (object == nullptr) return;
  object->~T();
  pool_deallocate(object, sizeof(T), alignof(T));
}

}  // namespace memgrad
