// B3 -- memory_summary() and the memory stats (seeds 001 section 7, 003 section 10).
//
// A few tensors of known sizes are allocated and some freed, then memory_summary() prints
// PyTorch's table and the key statistics are compared with values worked out beforehand from the
// shapes and the caching allocator's rules: small requests share 2 MiB segments, a 4 MiB request
// splits a 20 MiB segment, a 24 MiB request gets a segment of its own, and free blocks left inside
// split segments are the "non-releasable" (inactive split) bytes.
//
//   ./memgrad example b03 [--size N] [--device sim:0]
#include "examples/behaviours/b03_memory_summary.h"

#include <string_view>

#include <fmt/format.h>

#include "engine/memgrad.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"

namespace memgrad::examples {
namespace {

constexpr int64_t kOneKiB = 1024;
constexpr int64_t kOneMiB = 1024 * kOneKiB;

// What the sequence should leave in the stats, from the sizes alone.
struct Expected {
  int64_t a, b, c, d;                   // rounded block bytes
  int64_t small_segment = 2 * kOneMiB;  // a and b share it
  int64_t c_segment = 20 * kOneMiB;     // 1-10 MiB requests: a 20 MiB segment, split
  int64_t d_segment;                    // >= 10 MiB: rounded up to 2 MiB, not split
};

Expected expected_for(int64_t size) {
  Expected e{};
  e.a = 256 * kOneKiB;
  e.b = rounded(1000 * 4);  // 4,000 B -> 4,096 B
  e.c = 4 * kOneMiB;
  e.d = 24 * kOneMiB * size;
  e.d_segment = e.d;
  return e;
}

}  // namespace

SummaryResult measure_memory_summary(int64_t size, Device device) {
  const Expected e = expected_for(size);
  empty_cache(device);
  reset_peak_memory_stats(device);
  reset_accumulated_memory_stats(device);
  const MemoryStats start = memory_stats(device);

  const TensorOptions options = TensorOptions(kFloat32).with_device(device);
  const Tensor a = empty({64, 1024}, options);
  Tensor b = empty({1000}, options);
  const Tensor c = empty({1024, 1024}, options);
  Tensor d = empty({6144 * size, 1024}, options);  // too big for c's 16 MiB cached tail
  d = Tensor();
  b = Tensor();  // merges back into the small segment's free tail

  const MemoryStats now = memory_stats(device);
  SummaryResult result;
  result.summary = memory_summary(device);
  const int64_t live = e.a + e.c;
  const int64_t peak_allocated = e.a + e.b + e.c + e.d;
  const int64_t reserved = e.small_segment + e.c_segment + e.d_segment;
  // Free blocks in split segments: the small segment's tail (b merged back) + c's 16 MiB tail.
  const int64_t inactive = (e.small_segment - e.a) + (e.c_segment - e.c);
  // Current and peak relative to the start's current value (the peaks were reset to it).
  auto check = [&](const char* key, PooledStat MemoryStats::*stat, bool is_bytes,
                   int64_t expected_current, int64_t expected_peak) {
    const int64_t base = (start.*stat).all().current;
    result.stats.push_back({fmt::format("{}.all.current", key), is_bytes, expected_current,
                            (now.*stat).all().current - base});
    result.stats.push_back(
        {fmt::format("{}.all.peak", key), is_bytes, expected_peak, (now.*stat).all().peak - base});
  };
  check("allocated_bytes", &MemoryStats::allocated_bytes, true, live, peak_allocated);
  check("reserved_bytes", &MemoryStats::reserved_bytes, true, reserved, reserved);
  check("active_bytes", &MemoryStats::active_bytes, true, live, peak_allocated);
  check("inactive_split_bytes", &MemoryStats::inactive_split_bytes, true, inactive, inactive);
  check("allocation", &MemoryStats::allocation, false, 2, 4);
  check("segment", &MemoryStats::segment, false, 3, 3);
  check("inactive_split", &MemoryStats::inactive_split, false, 2, 2);
  // Totals since reset_accumulated_memory_stats() (which also zeroes the event counters).
  result.stats.push_back({"allocation.all.allocated", false, 4, now.allocation.all().allocated});
  result.stats.push_back({"allocation.all.freed", false, 2, now.allocation.all().freed});
  result.stats.push_back({"segment.all.allocated", false, 3, now.segment.all().allocated});
  result.stats.push_back({"num_alloc_retries", false, 0, now.num_alloc_retries});
  result.stats.push_back({"num_ooms", false, 0, now.num_ooms});
  return result;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B3", "memory_summary() and memory stats", "seeds 001 (section 7) and 003 (section 10)",
    "memory_summary() gives a detailed picture of the allocator's state, and the memory stats "
    "help find where memory goes."};

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const SummaryResult r = measure_memory_summary(flags.size, device);
  fmt::print(
      "float32 tensors on {}: a (64 x 1024), b (1000), c (1024 x 1024), d ({} x 1024); "
      "then d and b freed.\n\n{}\n",
      device.str(), 6144 * flags.size, r.summary);
  MemoryReport bytes("Byte statistics (memory_stats keys), relative to the start:");
  bool counts_match = true;
  std::string counts;
  for (const StatCheck& s : r.stats) {
    if (s.is_bytes) {
      bytes.add(s.name, s.expected, s.measured);
      continue;
    }
    counts_match = counts_match && s.expected == s.measured;
    counts += fmt::format("  {:<34} {:>8} {:>8}  {}\n", s.name, s.expected, s.measured,
                          s.expected == s.measured ? "yes" : "NO");
  }
  bytes.print();
  fmt::print("\nCounts:\n  {:<34} {:>8} {:>8}  match\n{}", "", "expected", "measured", counts);

  auto measured = [&](std::string_view name) {
    for (const StatCheck& s : r.stats) {
      if (s.name == name) return s.measured;
    }
    return int64_t{0};
  };
  const int64_t allocated = measured("allocated_bytes.all.current");
  const int64_t reserved = measured("reserved_bytes.all.current");
  const int64_t inactive = measured("inactive_split_bytes.all.current");
  print_conclusion(fmt::format(
      "of {} B reserved, {} B hold live tensors, {} B are non-releasable (free blocks inside split "
      "segments) and {} B is a whole cached segment that empty_cache() could return; every "
      "statistic {} the value computed from the shapes.",
      with_commas(reserved), with_commas(allocated), with_commas(inactive),
      with_commas(reserved - allocated - inactive),
      bytes.all_match() && counts_match ? "matched" : "did NOT all match"));
  return bytes.all_match() && counts_match ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b03_memory_summary_main() is its main() (a generated file calls it).
int b03_memory_summary_main(int argc, char** argv) {
  return run_behaviour(argc, argv, kInfo, body);
}

}  // namespace memgrad::examples
