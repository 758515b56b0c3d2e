// B4 -- OOM while memory seems free: fragmentation and cached memory (seed 001, FAQ).
//
// On a simulated device of 100 MiB: a 60 MiB tensor x1 is allocated and freed (its segment stays
// cached), a 20 MiB tensor y is served from the front of that cached block (best fit splits it
// into 20 + 40 MiB), and a 50 MiB request z fails although 80 MiB are free in total: 40 MiB
// cached in the split segment (which empty_cache() cannot release while y lives in it) and 40 MiB
// never reserved. The same sequence is then run with each fix: max_split_size_mb:40 (the 60 MiB
// block is never split), empty_cache() before y, and expandable segments when the build has them.
//
//   ./memgrad example b04 [--size N] [--device sim:N]
#include "examples/behaviours/b04_fragmentation_oom.h"

#include <functional>

#include <fmt/format.h>

#include "engine/memgrad.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"
#include "lab/policy_registry.h"

namespace memgrad::examples {
namespace {

constexpr int64_t kOneMiB = 1024 * 1024;
constexpr int64_t kLargePage = 20 * kOneMiB;  // expandable segments map large-pool pages of 20 MiB

bool expandable_known() {
  const std::string_view policies = known_policies();
  for (size_t start = 0; start <= policies.size();) {
    size_t end = policies.find(", ", start);
    if (end == std::string_view::npos) end = policies.size();
    if (policies.substr(start, end - start) == "expandable") return true;
    start = end + 2;
  }
  return false;
}

// "[   0 MiB,  60 MiB) segment of 60.00 MiB: 20.00 MiB allocated | 40.00 MiB free"
std::vector<std::string> layout_of(Device device) {
  std::vector<std::string> lines;
  for (const SegmentSnapshot& seg : allocator_for(device).snapshot()) {
    std::string blocks;
    for (const BlockSnapshot& b : seg.blocks) {
      std::string requested;
      if (b.allocated && b.requested != b.nbytes) {
        requested = fmt::format(" (requested {})", human_bytes(static_cast<int64_t>(b.requested)));
      }
      blocks += fmt::format("{}{} {}{}", blocks.empty() ? "" : " | ",
                            human_bytes(static_cast<int64_t>(b.nbytes)),
                            b.allocated ? "allocated" : "free", requested);
    }
    lines.push_back(fmt::format("[{:>4} MiB, {:>4} MiB) segment of {}: {}", seg.address / kOneMiB,
                                (seg.address + seg.nbytes) / kOneMiB,
                                human_bytes(static_cast<int64_t>(seg.nbytes)), blocks));
  }
  return lines;
}

struct Setting {
  std::string name;
  AllocatorConfig config;
  bool empty_cache_before_y = false;
  bool expected_oom = false;
  int64_t expected_allocated = 0;
  int64_t expected_reserved = 0;
};

FragmentationRun run_sequence(const Setting& s, int64_t size, Device device, int64_t capacity,
                              const std::string& snapshot_path) {
  set_allocator_config(device, s.config);
  set_sim_capacity(device.index(), static_cast<size_t>(capacity));  // a fresh device
  if (!snapshot_path.empty()) record_memory_history(device);
  const TensorOptions options = TensorOptions(kFloat32).with_device(device);
  FragmentationRun run;
  run.name = s.name;
  run.expected_oom = s.expected_oom;
  run.expected_allocated = s.expected_allocated;
  run.expected_reserved = s.expected_reserved;

  Tensor x1 = empty({15360 * size, 1024}, options);  // 60 MiB
  x1 = Tensor();                                     // cached, unsplit
  if (s.empty_cache_before_y) empty_cache(device);
  const Tensor y = empty({5120 * size, 1024}, options);  // 20 MiB
  Tensor z;
  try {
    z = empty({12800 * size, 1024}, options);  // 50 MiB
  } catch (const OutOfMemoryError& e) {
    run.oom = true;
    run.oom_message = e.what();
    run.oom_info = e.info();
    if (!snapshot_path.empty()) dump_snapshot(snapshot_path, device);
  }
  const MemoryStats stats = memory_stats(device);
  run.allocated = stats.allocated_bytes.all().current;
  run.reserved = stats.reserved_bytes.all().current;
  run.alloc_retries = stats.num_alloc_retries;
  run.ooms = stats.num_ooms;
  run.layout = layout_of(device);
  return run;
}

std::vector<Setting> settings_for(int64_t size, bool with_expandable) {
  const int64_t x1 = 60 * kOneMiB * size, y = 20 * kOneMiB * size, z = 50 * kOneMiB * size;
  std::vector<Setting> settings;
  // Default: y splits the cached x1 block; z fits neither the 40 MiB tail nor the device.
  settings.push_back({"caching (default)", AllocatorConfig{}, false, true, y, x1});
  // max_split_size: y may not split the oversize x1 block and gets a segment of its own. z may
  // use the cached x1 block whole when it wastes less than max_non_split_rounding_size (20 MiB);
  // otherwise the allocator frees that oversize block and obtains a segment of z's size.
  const int64_t max_split_mb = 40 * size;
  const std::string split = fmt::format("max_split_size_mb:{}", max_split_mb);
  const bool z_reuses_x1 = x1 - z < 20 * kOneMiB;
  const int64_t split_bytes = y + (z_reuses_x1 ? x1 : z);
  settings.push_back(
      {split, AllocatorConfig::parse(split), false, false, split_bytes, split_bytes});
  // empty_cache() before y: x1's segment goes back to the device; y and z get their own.
  settings.push_back({"empty_cache() before y", AllocatorConfig{}, true, false, y + z, y + z});
  if (with_expandable) {
    // One growing segment: z extends the free tail after y by whole 20 MiB pages.
    const int64_t mapped = (y + z + kLargePage - 1) / kLargePage * kLargePage;
    settings.push_back({"policy:expandable", AllocatorConfig::parse("policy:expandable"), false,
                        false, y + z, mapped});
  }
  return settings;
}

// Restores the simulated device's capacity and allocator when the measurement ends.
class SimRestore {
 public:
  explicit SimRestore(Device device)
      : device_(device), capacity_(allocator_for(device).source().capacity()) {}
  SimRestore(const SimRestore&) = delete;
  SimRestore& operator=(const SimRestore&) = delete;
  ~SimRestore() {
    try {
      set_allocator_config(device_, AllocatorConfig::from_env());
      set_sim_capacity(device_.index(), capacity_);
    } catch (const Error&) {  // nothing better to do in a destructor
    }
  }

 private:
  Device device_;
  size_t capacity_;
};

}  // namespace

FragmentationResult measure_fragmentation(int64_t size, int sim_index,
                                          const std::string& snapshot_path) {
  const Device device(DeviceType::Sim, sim_index);
  const SimRestore restore(device);
  FragmentationResult result;
  result.capacity = 100 * kOneMiB * size;
  result.expandable_known = expandable_known();
  for (const Setting& s : settings_for(size, result.expandable_known)) {
    const bool first = result.runs.empty();  // the default caching run
    result.runs.push_back(
        run_sequence(s, size, device, result.capacity, first ? snapshot_path : std::string()));
  }
  return result;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B4", "OOM while memory seems free: fragmentation and cached memory", "seed 001 (FAQ)",
    "An out-of-memory error can happen while memory looks available, because free memory is "
    "fragmented or held in the allocator's cache."};

// Prints the OOM's fields against their expected values; whether all matched.
bool print_oom(const FragmentationRun& run, int64_t size) {
  const OutOfMemoryInfo& i = run.oom_info;
  MemoryReport fields("OutOfMemoryError fields:");
  fields.add("requested", 50 * kOneMiB * size, static_cast<int64_t>(i.requested));
  fields.add("alloc_size (the segment it tried to obtain)", 50 * kOneMiB * size,
             static_cast<int64_t>(i.alloc_size));
  fields.add("capacity", 100 * kOneMiB * size, static_cast<int64_t>(i.capacity));
  fields.add("free (never reserved)", 40 * kOneMiB * size, static_cast<int64_t>(i.free));
  fields.add("allocated", 20 * kOneMiB * size, static_cast<int64_t>(i.allocated));
  fields.add("reserved", 60 * kOneMiB * size, static_cast<int64_t>(i.reserved));
  fields.add("reserved but unallocated (the split tail)", 40 * kOneMiB * size,
             static_cast<int64_t>(i.reserved - i.allocated));
  fmt::print("\nz failed with OutOfMemoryError:\n  {}\n\n", run.oom_message);
  fields.print();
  fmt::print("  num_alloc_retries {} (expected 1), num_ooms {} (expected 1)\n", run.alloc_retries,
             run.ooms);
  // Where the 40 MiB were: all in x1's segment behind y, which the live y fences off.
  const FragmentationReport& f = i.fragmentation;
  MemoryReport where("where the reserved but unallocated bytes were (its fragmentation fields):");
  where.add("hard: fenced by live blocks (x1's tail behind y)", 40 * kOneMiB * size,
            static_cast<int64_t>(f.hard));
  where.add("soft: in wholly free segments", 0, static_cast<int64_t>(f.soft));
  where.add("held for other streams", 0, static_cast<int64_t>(f.stream));
  where.add("largest free block", 40 * kOneMiB * size, static_cast<int64_t>(f.largest_free_block));
  where.add("largest request that would succeed", 40 * kOneMiB * size,
            static_cast<int64_t>(f.largest_request));
  fmt::print("\n");
  where.print();
  return fields.all_match() && where.all_match();
}

std::string g_snapshot_path;  // --snapshot

int body(const BehaviourFlags& flags) {
  const Device requested(flags.device);
  const int index = requested.type() == DeviceType::Sim ? requested.index() : 0;
  const FragmentationResult r = measure_fragmentation(flags.size, index, g_snapshot_path);
  const int64_t s = flags.size;
  fmt::print("device sim:{}, capacity {}; x1 = {}, freed; y = {}; z = {}\n", index,
             human_bytes(r.capacity), human_bytes(60 * kOneMiB * s), human_bytes(20 * kOneMiB * s),
             human_bytes(50 * kOneMiB * s));
  bool ok = true;
  for (const FragmentationRun& run : r.runs) {
    fmt::print("\n--- {}: z {} (expected: {})\n", run.name,
               run.oom ? "raised OutOfMemoryError" : "fits", run.expected_oom ? "OOM" : "fits");
    for (const std::string& line : run.layout) fmt::print("  {}\n", line);
    MemoryReport report("after the sequence:");
    report.add("allocated", run.expected_allocated, run.allocated);
    report.add("reserved", run.expected_reserved, run.reserved);
    report.print();
    if (run.oom) ok = print_oom(run, s) && ok;
    ok = ok && report.all_match() && run.oom == run.expected_oom;
  }
  if (!r.expandable_known) {
    fmt::print(
        "\n--- policy:expandable: not in this build (known policies: {}); expandable "
        "segments arrive with the allocator policy lab.\n",
        known_policies());
  }
  const FragmentationRun& base = r.runs[0];
  int fixed = 0;
  for (size_t i = 1; i < r.runs.size(); ++i) fixed += r.runs[i].oom ? 0 : 1;
  if (!g_snapshot_path.empty() && base.oom) {
    fmt::print(
        "\nmemory snapshot of the default run at the OOM: {} (open it in "
        "https://pytorch.org/memory_viz)\n",
        g_snapshot_path);
  }
  print_conclusion(fmt::format(
      "the default run {} for a {} request with {} free in total ({} cached in a split segment + "
      "{} never reserved); {} of {} fixes let z fit.",
      base.oom ? "raised OutOfMemoryError" : "did NOT fail", human_bytes(50 * kOneMiB * s),
      human_bytes(r.capacity - base.allocated), human_bytes(base.reserved - base.allocated),
      human_bytes(r.capacity - base.reserved), fixed, r.runs.size() - 1));
  return ok ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b04_fragmentation_oom_main() is its main() (a generated file calls it).
int b04_fragmentation_oom_main(int argc, char** argv) {
  ExtraFlags extra;
  extra.path("--snapshot", g_snapshot_path,
             "Write the default run's memory snapshot (PyTorch's format) here when z fails: "
             "open it in pytorch.org/memory_viz or replay it with ./memgrad lab replay");
  return run_behaviour(argc, argv, kInfo, body, extra);
}

}  // namespace memgrad::examples
