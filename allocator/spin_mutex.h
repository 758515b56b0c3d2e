// SpinMutex: the lock of an allocator's frame (PolicyAllocator), cheaper than std::mutex when,
// as almost always, one thread uses the allocator: taking it is one atomic exchange and giving
// it back one store, where glibc's mutex makes a call and an atomic operation each way (a cache
// hit of the caching policy takes the lock twice: allocate and free).
//
// A thread that finds it taken spins briefly (the critical sections are a few dozen
// nanoseconds), then yields its core at each try, then sleeps between tries: a section that asks
// the memory source for a new segment or synchronises streams (malloc, mmap, cudaMalloc: micro-
// to milliseconds) does not keep a waiter burning a core. Giving it back stays one store (no
// waiter to wake). Not fair, not recursive; meets BasicLockable and Lockable (std::lock_guard,
// std::unique_lock).
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

namespace memgrad {

class SpinMutex {
 public:
  void lock() noexcept {
    int spins = 0;
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) {
        ++spins;
        if (spins < kSpinsBeforeYield) {
          relax();
        } else if (spins < kTriesBeforeSleep) {
          std::this_thread::yield();
        } else {
          std::this_thread::sleep_for(std::chrono::microseconds(50));
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
  static constexpr int kTriesBeforeSleep = kSpinsBeforeYield + 64;
  static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  std::atomic<bool> locked_ = false;
};

}  // namespace memgrad
