// B2 -- empty_cache() frees cached, never allocated memory (seed 001, FAQ).
//
// Three tensors are allocated and two of them freed: their blocks stay cached, so reserved
// exceeds allocated. empty_cache() then returns every cached segment that holds no live block;
// allocated does not change. One segment is not returned: the 20 MiB segment that the caching
// allocator split to serve the small live tensor c. Its free part is what memory_summary() calls
// "non-releasable" (inactive_split_bytes), and it is exactly what stays reserved above allocated
// until c is freed too.
//
//   ./memgrad example b02 [--size N] [--device sim:0]
#include "examples/behaviours/b02_empty_cache.h"

#include <sstream>

#include <fmt/format.h>

#include "engine/memgrad.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"

namespace memgrad::examples {
namespace {

constexpr int64_t kOneMiB = 1024 * 1024;

struct Counters {
  int64_t allocated;
  int64_t reserved;
  int64_t non_releasable;
};

Counters read_counters(Device device) {
  const MemoryStats s = memory_stats(device);
  return {s.allocated_bytes.all().current, s.reserved_bytes.all().current,
          s.inactive_split_bytes.all().current};
}

// The summary's allocated, reserved and non-releasable rows.
std::string summary_rows(Device device) {
  std::istringstream lines(memory_summary(device, /*abbreviated=*/true));
  std::string rows;
  for (std::string line; std::getline(lines, line);) {
    for (const char* name : {"Allocated memory", "Reserved memory", "Non-releasable memory"}) {
      if (line.find(name) != std::string::npos) rows += line + "\n";
    }
  }
  return rows;
}

}  // namespace

EmptyCacheResult measure_empty_cache(int64_t size, Device device) {
  // Sizes first. a and b are >= 10 MiB: each gets a segment of exactly its size (a multiple of
  // 2 MiB), never split. c is 2 MiB: a 20 MiB segment whose free 18 MiB tail stays cached.
  const int64_t a_bytes = 12 * kOneMiB * size, b_bytes = 16 * kOneMiB * size, c_bytes = 2 * kOneMiB;
  const int64_t c_segment = 20 * kOneMiB;
  const int64_t c_tail = c_segment - c_bytes;

  empty_cache(device);
  const Counters start = read_counters(device);
  EmptyCacheResult result;
  result.split_segment = c_segment;
  auto step = [&](std::string what, int64_t allocated, int64_t reserved, int64_t non_releasable) {
    const Counters now = read_counters(device);
    result.steps.push_back({std::move(what), allocated, now.allocated - start.allocated, reserved,
                            now.reserved - start.reserved, non_releasable,
                            now.non_releasable - start.non_releasable});
  };
  const TensorOptions options = TensorOptions(kFloat32).with_device(device);
  // a and b first: allocated after c, they would fit into c's cached tail instead.
  Tensor a = empty({3072 * size, 1024}, options);
  Tensor b = empty({4096 * size, 1024}, options);
  Tensor c = empty({512, 1024}, options);
  step("a, b, c allocated", a_bytes + b_bytes + c_bytes, a_bytes + b_bytes + c_segment, c_tail);
  a = Tensor();
  b = Tensor();
  step("a, b freed", c_bytes, a_bytes + b_bytes + c_segment, c_tail);
  empty_cache(device);
  step("empty_cache()", c_bytes, c_segment, c_tail);
  result.summary_rows = summary_rows(device);
  c = Tensor();
  step("c freed", 0, c_segment, 0);
  empty_cache(device);
  step("empty_cache() again", 0, 0, 0);
  return result;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B2", "empty_cache() frees cached, never allocated memory", "seed 001 (FAQ)",
    "empty_cache() gives cached memory back to the device; memory held by live tensors is not "
    "reduced by it."};

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const EmptyCacheResult r = measure_empty_cache(flags.size, device);
  MemoryReport report(fmt::format(
      "float32 tensors a ({} x 1024), b ({} x 1024), c (512 x 1024) on {}, bytes relative to the "
      "start:",
      3072 * flags.size, 4096 * flags.size, device.str()));
  for (const CacheStep& s : r.steps) {
    report.add(fmt::format("{:<20} allocated", s.what), s.expected_allocated, s.allocated);
    report.add(fmt::format("{:<20} reserved", s.what), s.expected_reserved, s.reserved);
    report.add(fmt::format("{:<20} non-releasable", s.what), s.expected_non_releasable,
               s.non_releasable);
  }
  report.print();
  fmt::print(
      "\nmemory_summary() rows after the first empty_cache() (Cur, Peak, Tot Alloc, Tot "
      "Freed):\n{}",
      r.summary_rows);

  const CacheStep& freed = r.steps[1];
  const CacheStep& emptied = r.steps[2];
  const CacheStep& last = r.steps[4];
  print_conclusion(fmt::format(
      "empty_cache() left allocated at {} B (unchanged) and lowered reserved from {} B to {} B; "
      "the {} B still reserved above allocated are the free tail of the split segment holding c "
      "(non-releasable: {} B). Once c was freed, empty_cache() brought reserved to {} B = "
      "allocated.",
      with_commas(emptied.allocated), with_commas(freed.reserved), with_commas(emptied.reserved),
      with_commas(emptied.reserved - emptied.allocated), with_commas(emptied.non_releasable),
      with_commas(last.reserved)));
  return report.all_match() ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b02_empty_cache_main() is its main() (a generated file calls it).
int b02_empty_cache_main(int argc, char** argv) { return run_behaviour(argc, argv, kInfo, body); }

}  // namespace memgrad::examples
