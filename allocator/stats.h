// Allocator statistics with PyTorch's names and meaning.
//
// A Stat tracks one quantity four ways: its current value, its peak since the last reset, the
// total ever added ("allocated") and the total ever removed ("freed"). MemoryStats holds one
// Stat per quantity and pool, exactly the keys of torch.cuda.memory_stats(), so numbers printed
// by memgrad and by PyTorch for the same program can be compared line by line.
//
// What each byte quantity counts (all block sizes are the allocator's rounded sizes):
//   allocated_bytes      blocks handed out to callers and not yet freed by them
//   requested_bytes      the same blocks, counted at the size the caller asked for
//   active_bytes         allocated blocks plus freed blocks still waiting on another stream
//   reserved_bytes       everything obtained from the source (segments), used or cached
//   inactive_split_bytes cached free blocks inside split segments: reserved, unusable by
//                        empty_cache, and the usual sign of fragmentation
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace memgrad {

// One quantity: current value, high-water mark and cumulative totals.
struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;  // total ever added
  int64_t freed = 0;      // total ever removed

  void increase(int64_t amount) {
    current += amount;
    if (current > peak) peak = current;
    allocated += amount;
  }
  void decrease(int64_t amount) {
    current -= amount;
    freed += amount;
  }
  // increase(delta) for a positive `delta`, decrease(-delta) for a negative one.
  void change(int64_t delta) {
    if (delta > 0) increase(delta);
    if (delta < 0) decrease(-delta);
  }
  void reset_peak() { peak = current; }
  void reset_accumulated() { allocated = freed = 0; }
};

// Which part of the allocator a Stat covers (PyTorch: "all", "small_pool", "large_pool").
enum class StatPool : int { All = 0, SmallPool = 1, LargePool = 2 };
inline constexpr int kNumStatPools = 3;

// A Stat per pool; updates touch the aggregate and the pool's own entry together. StatPool::All
// touches the aggregate only (an allocator without pools, like the pinned host one).
struct PooledStat {
  std::array<Stat, kNumStatPools> pools;

  const Stat& all() const { return pools[0]; }
  const Stat& small_pool() const { return pools[1]; }
  const Stat& large_pool() const { return pools[2]; }
  void increase(StatPool pool, int64_t amount) {
    pools[0].increase(amount);
    if (pool != StatPool::All) pools[static_cast<int>(pool)].increase(amount);
  }
  void decrease(StatPool pool, int64_t amount) {
    pools[0].decrease(amount);
    if (pool != StatPool::All) pools[static_cast<int>(pool)].decrease(amount);
  }
  void change(StatPool pool, int64_t delta) {
    pools[0].change(delta);
    if (pool != StatPool::All) pools[static_cast<int>(pool)].change(delta);
  }
};

// Everything torch.cuda.memory_stats() reports, with the same names. Counts are numbers of
// blocks or segments; *_bytes are bytes.
struct MemoryStats {
  PooledStat allocation;             // blocks handed out (count)
  PooledStat segment;                // segments obtained from the source (count)
  PooledStat active;                 // active blocks (count)
  PooledStat inactive_split;         // free blocks inside split segments (count)
  PooledStat allocated_bytes;        // bytes of blocks handed out
  PooledStat reserved_bytes;         // bytes of segments
  PooledStat active_bytes;           // bytes of active blocks
  PooledStat inactive_split_bytes;   // bytes of free blocks inside split segments
  PooledStat requested_bytes;        // bytes callers asked for (before rounding)
  Stat oversize_allocations;         // blocks >= max_split_size handed out
  Stat oversize_segments;            // segments >= max_split_size
  int64_t num_alloc_retries = 0;     // source failures that led to a cache flush and a retry
  int64_t num_ooms = 0;              // OutOfMemoryErrors thrown
  int64_t num_sync_all_streams = 0;  // waits on every pending stream event
  int64_t num_device_alloc = 0;      // calls to the source's allocate (segment or page maps)
  int64_t num_device_free = 0;       // calls to the source's free
  int64_t max_split_size = -1;       // configuration echo, bytes (-1 when unlimited, as PyTorch)

  // peak := current for every Stat.
  void reset_peak();
  // allocated/freed := 0 for every Stat, and the event counters back to 0.
  void reset_accumulated();
  // Adds `times` x (this - before) to every Stat's allocated and freed totals: what `times` more
  // repetitions of the changes since `before` add, for changes that end where they began (a free
  // and an allocation of the same block; currents and peaks stay as they are).
  void repeat_accumulated(const MemoryStats& before, int64_t times);

  // The flat dictionary of torch.cuda.memory_stats(): keys like "allocated_bytes.all.current",
  // sorted by name.
  std::map<std::string, int64_t> to_flat_map() const;
};

}  // namespace memgrad
