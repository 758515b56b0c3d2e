// SpinMutex: the lock of an allocator's frame (PolicyAllocator), cheaper than std::mutex when,
// as almost always, one thread uses the allocator: taking it is one atomic exchange and giving
// it back one store, where glibc's mutex makes a call and an atomic operation each way (a cache
// hit of the caching policy takes the lock twice: allocate and free).
//
// A thread that finds it taken spins briefly (the critical sections are a few dozen
// nanoseconds), then yields its core at each try: a section that asks the memory source for a
// new segment (malloc, mmap or cudaMalloc, microseconds or more) does not keep a waiter burning
// a core. Not fair, not recursive; meets BasicLockable and Lockable (std::lock_guard,
// std::unique_lock).
#pragma once

#include <atomic>
#include <thread>

namespace memgrad {

class SpinMutex {
 public:
  void lock() noexcept {
    int spins = 0;
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (spins < kSpinsBeforeYield) {
          ++spins;
          relax();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  static constexpr int kSpinsBeforeYield = 128;
  static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  std::atomic<bool> locked_ = false;
};

}  // namespace memgrad
