// MemoryStats: resets and the flat PyTorch-style dictionary.
#include "allocator/stats.h"

#include <functional>
#include <string_view>
#include <utility>

namespace memgrad {
namespace {

constexpr std::array<std::string_view, kNumStatPools> kPoolNames = {"all", "small_pool",
                                                                    "large_pool"};

void add_stat(std::map<std::string, int64_t>& out, const std::string& prefix, const Stat& s) {
  out[prefix + ".current"] = s.current;
  out[prefix + ".peak"] = s.peak;
  out[prefix + ".allocated"] = s.allocated;
  out[prefix + ".freed"] = s.freed;
}

// Visits every PooledStat with its PyTorch name.
template <typename Stats, typename Fn>
void for_each_pooled(Stats& s, Fn&& fn) {
  fn("allocation", s.allocation);
  fn("segment", s.segment);
  fn("active", s.active);
  fn("inactive_split", s.inactive_split);
  fn("allocated_bytes", s.allocated_bytes);
  fn("reserved_bytes", s.reserved_bytes);
  fn("active_bytes", s.active_bytes);
  fn("inactive_split_bytes", s.inactive_split_bytes);
  fn("requested_bytes", s.requested_bytes);
}

}  // namespace

void MemoryStats::reset_peak() {
  for_each_pooled(*this, [](std::string_view, PooledStat& p) {
    for (Stat& s : p.pools) s.reset_peak();
  });
  oversize_allocations.reset_peak();
  oversize_segments.reset_peak();
}

void MemoryStats::reset_accumulated() {
  for_each_pooled(*this, [](std::string_view, PooledStat& p) {
    for (Stat& s : p.pools) s.reset_accumulated();
  });
  oversize_allocations.reset_accumulated();
  oversize_segments.reset_accumulated();
  num_alloc_retries = num_ooms = num_sync_all_streams = 0;
  num_device_alloc = num_device_free = 0;
}

std::map<std::string, int64_t> MemoryStats::to_flat_map() const {
  std::map<std::string, int64_t> out;
  for_each_pooled(*this, [&](std::string_view name, const PooledStat& p) {
    for (int pool = 0; pool < kNumStatPools; ++pool) {
      add_stat(out, std::string(name) + "." + std::string(kPoolNames[pool]), p.pools[pool]);
    }
  });
  add_stat(out, "oversize_allocations", oversize_allocations);
  add_stat(out, "oversize_segments", oversize_segments);
  out["num_alloc_retries"] = num_alloc_retries;
  out["num_ooms"] = num_ooms;
  out["num_sync_all_streams"] = num_sync_all_streams;
  out["num_device_alloc"] = num_device_alloc;
  out["num_device_free"] = num_device_free;
  out["max_split_size"] = max_split_size;
  return out;
}

}  // namespace memgrad
