// lab_bench: the cost of an allocate or a free under each allocator policy, on real request
// sequences, and the planned policy's targets.
//
//   lab_bench [--quick] [--trace PATH] [--passes N]
//
// 1. Every policy of known_policies() replays the MLP training-step trace (traces/mlp_step.json,
//    or --trace) on a fresh simulated device each pass (lab/trace_replay.h) and prints
//    `lab_<policy>_ns_per_request: X ns` (the best of N timed passes; a request is one allocate
//    or one free, the source's work included: passthrough pays a source call, and the simulated
//    device's madvise, for every request).
// 2. The planned policy against caching on the three shipped traces, planned from each trace's
//    first step, timed passes alternating between the two so that both see the same machine
//    (the best of N, at least 21, for each):
//    peak reserved over the ideal peak, ns per request, and the requests that fell back; then
//    the targets (peak <= 1.05x the ideal on the training traces, time per request <= caching's).
// 3. Greedy by size against the ideal on random steps: the worst arena / ideal ratio found.
// Run by `./memgrad bench lab`. Exits 1 when a target of section 2 fails (after printing every
// section), 2 on bad usage.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "allocator/error.h"
#include "interop/trace_reader.h"
#include "lab/memory_plan.h"
#include "lab/policies/planned_allocator.h"
#include "lab/policy_registry.h"
#include "lab/trace_replay.h"

namespace {

using namespace memgrad;

constexpr int kPasses = 7;
constexpr int kQuickPasses = 2;
// Section 2's alternating passes, at least: a pass of a training trace takes tens of
// microseconds, so the best of a few is at the mercy of one interruption.
constexpr int kVersusPasses = 21;
constexpr double kPeakTarget = 1.05;  // planned's peak reserved / the ideal peak, at most

std::vector<std::string> policy_names() {
  std::vector<std::string> names;
  const std::string all(known_policies());
  for (size_t start = 0; start <= all.size();) {
    size_t end = all.find(", ", start);
    if (end == std::string::npos) end = all.size();
    names.push_back(all.substr(start, end - start));
    start = end + 2;
  }
  return names;
}

AllocatorConfig config_for(const std::string& policy, const std::string& trace) {
  AllocatorConfig config = AllocatorConfig::parse("policy:" + policy);
  if (policy == "planned") config.planned_plan = trace;
  return config;
}

// Section 1: every policy on one trace.
void every_policy(const std::string& path, int passes) {
  const ReplayPlan plan = plan_replay(read_trace_file(path).events);
  const size_t capacity = std::max<size_t>(4 * plan.ideal_peak, 256 * kMiB);
  fmt::print("config: trace {}, {} requests, simulated device of {} MiB, best of {} passes\n", path,
             plan.ops.size(), capacity / kMiB, passes);
  for (const std::string& policy : policy_names()) {
    const ReplayResult r =
        replay(plan, config_for(policy, path), capacity, {.timed_passes = passes});
    fmt::print("lab_{}_ns_per_request: {:.1f} ns\n", policy, r.ns_per_op);
  }
}

struct Versus {
  std::string name;                             // the trace's file name without .json
  double planned_ratio = 0, caching_ratio = 0;  // peak reserved / ideal peak
  double planned_ns = 0, caching_ns = 0;
  PlannedCounts counts;
};

// Section 2 for one trace: the peaks from one serving pass each, the times from alternating
// single timed passes (best of each).
Versus planned_versus_caching(const std::string& path, int passes) {
  const ReplayPlan plan = plan_replay(read_trace_file(path).events);
  const size_t capacity = std::max<size_t>(4 * plan.ideal_peak, 256 * kMiB);
  Versus v;
  v.name = path.substr(path.find_last_of('/') + 1);
  v.name = v.name.substr(0, v.name.find('.'));
  const double ideal = static_cast<double>(std::max<size_t>(plan.ideal_peak, 1));
  for (int pass = 0; pass < passes; ++pass) {
    ReplayOptions planned_options{.timed_passes = 1};
    planned_options.inspect = [&v](const PolicyAllocator& a) {
      v.counts = dynamic_cast<const PlannedAllocator&>(a).planned_counts();
    };
    const ReplayResult c = replay(plan, config_for("caching", path), capacity, {.timed_passes = 1});
    const ReplayResult p = replay(plan, config_for("planned", path), capacity, planned_options);
    v.caching_ratio = static_cast<double>(c.peak_reserved) / ideal;
    v.planned_ratio = static_cast<double>(p.peak_reserved) / ideal;
    v.caching_ns = pass == 0 ? c.ns_per_op : std::min(v.caching_ns, c.ns_per_op);
    v.planned_ns = pass == 0 ? p.ns_per_op : std::min(v.planned_ns, p.ns_per_op);
  }
  fmt::print(
      "lab_planned_{0}_peak_over_ideal: {1:.3f} x\n"
      "lab_caching_{0}_peak_over_ideal: {2:.3f} x\n",
      v.name, v.planned_ratio, v.caching_ratio);
  fmt::print(
      "lab_planned_{0}_ns_per_request: {1:.1f} ns\n"
      "lab_caching_{0}_ns_per_request: {2:.1f} ns\n",
      v.name, v.planned_ns, v.caching_ns);
  fmt::print("lab_planned_{}_fallbacks: {} requests\n", v.name,
             v.counts.deviations() + v.counts.unplanned);
  return v;
}

// Section 3: random steps (requests of 512 B to 1 MiB, random lifetimes, a few outliving),
// planned alone; the worst arena / ideal.
void greedy_on_random_steps(int steps) {
  std::mt19937_64 rng(16);
  const auto pick = [&](size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(rng);
  };
  double worst = 1.0, sum = 0.0;
  for (int t = 0; t < steps; ++t) {
    RecordedStep step;
    std::vector<uint64_t> live;
    const size_t n = pick(20, 200);
    for (uint64_t id = 0; id < n; ++id) {
      step.push_back({true, id, pick(0, 1) == 0 ? 512 * pick(1, 16) : pick(1, kMiB)});
      live.push_back(id);
      while (!live.empty() && pick(0, 2) != 0) {
        const size_t at = pick(0, live.size() - 1);
        step.push_back({false, live[at], 0});
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
      }
    }
    for (size_t i = 0; i + 3 < live.size(); ++i) step.push_back({false, live[i], 0});
    const MemoryPlan plan = plan_recording({step}, 0);
    const double ratio =
        static_cast<double>(plan.arena_nbytes) / static_cast<double>(plan.ideal_nbytes);
    worst = std::max(worst, ratio);
    sum += ratio;
  }
  fmt::print("planned_greedy_random_steps: {} steps of 20 to 200 requests\n", steps);
  fmt::print("planned_greedy_mean_arena_over_ideal: {:.4f} x\n", sum / steps);
  fmt::print("planned_greedy_worst_arena_over_ideal: {:.4f} x\n", worst);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string traces = std::string(MEMGRAD_SOURCE_ROOT) + "/traces/";
  std::string path = traces + "mlp_step.json";
  int passes = kPasses;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      passes = kQuickPasses;
      quick = true;
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
    every_policy(path, passes);
    const int versus_passes = quick ? passes : std::max(passes, kVersusPasses);
    fmt::print(
        "\nplanned (planned from each trace's first step) vs caching, same requests, "
        "timed passes alternating, best of {}:\n",
        versus_passes);
    std::vector<Versus> all;
    for (const char* name : {"mlp_step.json", "charlm_step.json", "fragmentation.json"}) {
      all.push_back(planned_versus_caching(traces + name, versus_passes));
    }
    bool targets_met = true;
    for (const Versus& v : all) {
      if (v.name == "fragmentation") continue;
      const bool peak_ok = v.planned_ratio <= kPeakTarget;
      const bool time_ok = v.planned_ns <= v.caching_ns;
      fmt::print(
          "target planned peak reserved <= {:.2f}x the ideal on {}: {} ({:.3f}x; caching "
          "{:.3f}x)\n",
          kPeakTarget, v.name, peak_ok ? "PASS" : "FAIL", v.planned_ratio, v.caching_ratio);
      fmt::print("target planned ns per request <= caching's on {}: {} ({:.1f} ns vs {:.1f} ns)\n",
                 v.name, time_ok ? "PASS" : "FAIL", v.planned_ns, v.caching_ns);
      targets_met = targets_met && peak_ok && time_ok;
    }
    fmt::print("\n");
    greedy_on_random_steps(quick ? 100 : 1000);
    return targets_met ? 0 : 1;  // a failed target fails the benchmark
  } catch (const memgrad::Error& e) {
    std::fprintf(stderr, "lab_bench: error: %s\n", e.what());
    return 1;
  }
}
