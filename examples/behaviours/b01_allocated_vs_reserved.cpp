// B1 -- allocated vs reserved memory; the caching allocator keeps freed blocks (seeds 001, 003).
//
// A tensor x is allocated, freed and replaced by a tensor y of the same size, and the device's
// allocated and reserved bytes are read after each step. Freeing x lowers allocated only: its
// block stays cached inside the segment the allocator obtained for it, so reserved is unchanged,
// and y is served from that cached block (the same address, no new segment from the device).
//
//   ./memgrad example b01 [--size N] [--device sim:0]
#include "examples/behaviours/b01_allocated_vs_reserved.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/memgrad.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"

namespace memgrad::examples {
namespace {

// The segment the caching allocator obtains from the device for a rounded request (PyTorch's
// rule): 2 MiB up to 1 MiB, 20 MiB below 10 MiB, the request rounded up to 2 MiB above.
int64_t segment_bytes(int64_t rounded_nbytes) {
  constexpr int64_t kOneMiB = 1024 * 1024;
  if (rounded_nbytes <= kOneMiB) return 2 * kOneMiB;
  if (rounded_nbytes < 10 * kOneMiB) return 20 * kOneMiB;
  return (rounded_nbytes + 2 * kOneMiB - 1) / (2 * kOneMiB) * (2 * kOneMiB);
}

struct Counters {
  int64_t allocated;
  int64_t reserved;
  int64_t segments;
};

Counters read_counters(Device device) {
  const MemoryStats s = memory_stats(device);
  return {s.allocated_bytes.all().current, s.reserved_bytes.all().current, s.num_device_alloc};
}

}  // namespace

ReserveResult measure_allocated_vs_reserved(int64_t size, Device device) {
  const Shape shape = {512 * size, 1024};
  const int64_t block = rounded(512 * size * 1024 * 4);
  const int64_t segment = segment_bytes(block);

  empty_cache(device);
  const Counters start = read_counters(device);
  ReserveResult result;
  auto step = [&](std::string what, int64_t allocated, int64_t reserved, int64_t segments) {
    const Counters now = read_counters(device);
    result.steps.push_back({std::move(what), allocated, now.allocated - start.allocated, reserved,
                            now.reserved - start.reserved, segments,
                            now.segments - start.segments});
  };
  step("start (after empty_cache())", 0, 0, 0);

  const TensorOptions options = TensorOptions(kFloat32).with_device(device);
  Tensor x = empty(shape, options);
  const auto* x_address = static_cast<const char*>(x.data_ptr());
  step(fmt::format("x = empty({})", to_string(shape)), block, segment, 1);
  x = Tensor();  // the last handle goes: the block returns to the allocator's cache
  step("x freed", 0, segment, 1);
  const Tensor y = empty(shape, options);
  step(fmt::format("y = empty({})", to_string(shape)), block, segment, 1);
  result.reuse_offset = static_cast<const char*>(y.data_ptr()) - x_address;
  return result;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B1", "allocated vs reserved memory; the caching allocator keeps freed blocks",
    "seeds 001 (sections 2 and FAQ) and 003",
    "Allocated memory is what live tensors use; reserved memory also counts the blocks the "
    "caching allocator keeps after tensors are freed, to reuse them without asking the device."};

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const ReserveResult r = measure_allocated_vs_reserved(flags.size, device);
  MemoryReport report(
      fmt::format("A float32 ({}, 1024) tensor x, then y of the same size, on {}; "
                  "bytes relative to the start:",
                  512 * flags.size, device.str()));
  size_t width = 0;
  for (const ReserveStep& s : r.steps) width = std::max(width, s.what.size());
  bool segments_match = true;
  for (const ReserveStep& s : r.steps) {
    report.add(fmt::format("{:<{}} allocated", s.what, width), s.expected_allocated, s.allocated);
    report.add(fmt::format("{:<{}} reserved", s.what, width), s.expected_reserved, s.reserved);
    segments_match = segments_match && s.segments == s.expected_segments;
  }
  report.print();
  fmt::print("\nsegments obtained from the device (num_device_alloc), expected / measured:\n");
  for (const ReserveStep& s : r.steps) {
    fmt::print("  {:<{}} {} / {}\n", s.what, width, s.expected_segments, s.segments);
  }
  fmt::print("\ny.data_ptr() relative to the freed x.data_ptr(): {:+} B\n", r.reuse_offset);

  const ReserveStep& freed = r.steps[2];
  const ReserveStep& reused = r.steps[3];
  print_conclusion(fmt::format(
      "freeing x lowered allocated to {} B while reserved stayed at {} B (the cached segment); y "
      "{} x's block ({:+} B) and {} new segment.",
      freed.allocated, with_commas(freed.reserved),
      r.reuse_offset == 0 ? "reused" : "did not reuse", r.reuse_offset,
      reused.segments == r.steps[1].segments ? "needed no" : "needed a"));
  return report.all_match() && segments_match && r.reuse_offset == 0 ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b01_allocated_vs_reserved_main() is its main() (a generated file calls it).
int b01_allocated_vs_reserved_main(int argc, char** argv) {
  return run_behaviour(argc, argv, kInfo, body);
}

}  // namespace memgrad::examples
