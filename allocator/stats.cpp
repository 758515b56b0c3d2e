// MemoryStats: resets and the flat PyTorch-style dictionary.
#include "allocator/stats.h"

#include <array>
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

// Every PooledStat with its PyTorch name.
constexpr std::array<std::pair<std::string_view, PooledStat MemoryStats::*>, 9> kPooled = {{
    {"allocation", &MemoryStats::allocation},
    {"segment", &MemoryStats::segment},
    {"active", &MemoryStats::active},
    {"inactive_split", &MemoryStats::inactive_split},
    {"allocated_bytes", &MemoryStats::allocated_bytes},
    {"reserved_bytes", &MemoryStats::reserved_bytes},
    {"active_bytes", &MemoryStats::active_bytes},
    {"inactive_split_bytes", &MemoryStats::inactive_split_bytes},
    {"requested_bytes", &MemoryStats::requested_bytes},
}};

// Visits every PooledStat with its PyTorch name.
template <typename Stats, typename Fn>
void for_each_pooled(Stats& s, Fn&& fn) {
  for (const auto& [name, member] : kPooled) fn(name, s.*member);
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

void MemoryStats::repeat_accumulated(const MemoryStats& before, int64_t times) {
  const auto repeat = [times](Stat& now, const Stat& then) {
    now.allocated += times * (now.allocated - then.allocated);
    now.freed += times * (now.freed - then.freed);
  };
  for (const auto& [name, member] : kPooled) {
    for (int pool = 0; pool < kNumStatPools; ++pool) {
      repeat((this->*member).pools[pool], (before.*member).pools[pool]);
    }
  }
  repeat(oversize_allocations, before.oversize_allocations);
  repeat(oversize_segments, before.oversize_segments);
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
