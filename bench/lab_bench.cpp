// lab_bench: the cost of an allocate or a free under each allocator policy, on a real request
// sequence: the shipped MLP training-step trace (traces/mlp_step.json), replayed through every
// policy of known_policies() on a fresh simulated device each pass (allocator/trace_replay.h).
//
//   lab_bench [--quick] [--trace PATH] [--passes N]
//
// prints `lab_<policy>_ns_per_request: X ns` (the best of N timed passes; a request is one
// allocate or one free, the source's work included: passthrough pays a source call, and the
// simulated device's madvise, for every request). Run by `./memgrad bench lab`.
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "allocator/error.h"
#include "allocator/trace_replay.h"

namespace {

constexpr int kPasses = 7;
constexpr int kQuickPasses = 2;

}  // namespace

int main(int argc, char** argv) {
  using namespace memgrad;
  std::string path = std::string(MEMGRAD_SOURCE_ROOT) + "/traces/mlp_step.json";
  int passes = kPasses;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      passes = kQuickPasses;
    } else if (arg == "--trace" && i + 1 < argc) {
      path = argv[++i];
    } else if (arg == "--passes" && i + 1 < argc) {
      passes = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: lab_bench [--quick] [--trace PATH] [--passes N]\n");
      return 2;
    }
  }
  try {
    const RecordedTrace trace = read_trace_file(path);
    const ReplayPlan plan = plan_replay(trace.events);
    const size_t capacity = std::max<size_t>(4 * plan.ideal_peak, 256 * kMiB);
    fmt::print("config: trace {}, {} requests, simulated device of {} MiB, best of {} passes\n",
               path, plan.ops.size(), capacity / kMiB, passes);
    const std::string all(known_policies());
    for (size_t start = 0; start <= all.size();) {
      size_t end = all.find(", ", start);
      if (end == std::string::npos) end = all.size();
      const std::string policy = all.substr(start, end - start);
      start = end + 2;
      const ReplayResult r =
          replay(plan, AllocatorConfig::parse("policy:" + policy), capacity, {.timed_passes = passes});
      fmt::print("lab_{}_ns_per_request: {:.1f} ns\n", policy, r.ns_per_op);
    }
    return 0;
  } catch (const memgrad::Error& e) {
    std::fprintf(stderr, "lab_bench: error: %s\n", e.what());
    return 1;
  }
}
