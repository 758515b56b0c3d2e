// lab_scale_bench: the policy lab on a trace of a million events, against its targets.
//
// A training-like request stream (steps of 40 tensors of mixed sizes, freed in another order)
// is recorded by the caching policy on a simulated device until the trace holds at least 10^6
// events. Then:
//   replay      the trace's requests served by the caching policy again: events per second,
//               the plan and one pass over it (target: at least 10^6 events/s);
//   svg         trace_to_svg of all events: bytes and seconds (target: at most 2 MB);
//   plot        `lab_replay plot` of the trace written as JSON, as a user runs it: seconds
//               (target: at most 5 s; the Perfetto JSON it writes stays complete);
//   import      the recording's memory snapshot, written as a pickle of about 100 MB, read and
//               imported as a request stream by a fresh process (this program again, through
//               exec): seconds and peak resident memory against the file's size (targets: at
//               most 10 s and 3x).
//
//   lab_scale_bench [--quick] [--lab-replay PATH]      (--quick: 10^5 events, a 10 MB pickle)
//   lab_scale_bench --import FILE                      (the child's part)
//
// prints `name: value unit` lines and one PASS/FAIL line per target; exits 1 when one fails.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "allocator/atomic_file.h"
#include "allocator/bounded_memory.h"
#include "allocator/error.h"
#include "allocator/memory_snapshot.h"
#include "allocator/pickle.h"
#include "allocator/policy_registry.h"
#include "allocator/trace_replay.h"
#include "bench/bench_util.h"

namespace {

using namespace memgrad;

constexpr size_t kCapacity = 8 * kGiB;

// Records steps of a training-like stream until the trace has `events` events.
std::unique_ptr<PolicyAllocator> record(BoundedMemory& memory, size_t events) {
  std::unique_ptr<PolicyAllocator> a = make_allocator(AllocatorConfig{}, memory);
  a->trace().enable();
  std::mt19937_64 rng(3);
  const size_t sizes[] = {512, 4096, 65536, 1 << 20, 3 << 20, 12 << 20, 40000, 700000};
  std::vector<Block> live;
  size_t step = 0;
  while (a->trace().size() < events) {
    for (int i = 0; i < 40; ++i) {
      // Most steps repeat the same sizes; every 7th step a batch of another size.
      const size_t n = sizes[static_cast<size_t>(i) % 8] * (step % 7 == 6 ? 3 : 1) / 2 + 1;
      live.push_back(a->allocate(n));
      if (live.size() > 12 && rng() % 3 == 0) {
        const size_t k = rng() % live.size();
        a->free(live[k]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
    for (const Block& b : live) a->free(b);
    live.clear();
    ++step;
  }
  return a;
}

bool check(const char* what, bool ok) {
  std::printf("target: %s: %s\n", what, ok ? "PASS" : "FAIL");
  return ok;
}

double vm_hwm_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  return 0.0;
}

// The child: read and import FILE, report time and peak memory against its size.
int import_only(const char* path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const double file_mib = static_cast<double>(in.tellg()) / (1024.0 * 1024.0);
  const auto start = bench::Clock::now();
  const ImportedSnapshot s = import_snapshot_file(path);
  const double seconds = bench::seconds_since(start);
  const double peak = vm_hwm_mib();
  bench::report("lab_import_file_size", file_mib, "MiB");
  bench::report("lab_import_events", static_cast<double>(s.events.size()), "events");
  bench::report("lab_import_time", seconds, "s");
  bench::report("lab_import_peak_rss", peak, "MiB");
  bench::report("lab_import_rss_ratio", peak / file_mib, "x");
  const bool fast = check(fmt::format("import {:.0f} MiB in at most 10 s", file_mib).c_str(),
                          seconds <= 10.0);
  const bool small = check("importer's peak memory at most 3x the file", peak <= 3.0 * file_mib);
  return fast && small ? 0 : 1;
}

int run(size_t events, double pickle_mb, const std::string& lab_replay) {
  bool ok = true;
  BoundedMemory memory(kCapacity, "sim:0");
  std::unique_ptr<PolicyAllocator> a = record(memory, events);
  const std::vector<TraceEvent> trace = a->trace().events();
  const std::vector<TraceContextRecord> contexts = a->trace().contexts();
  fmt::print("config: {} events recorded by the caching policy on a simulated {} GiB device\n",
             trace.size(), kCapacity / kGiB);

  // replay: plan + one pass
  auto start = bench::Clock::now();
  const ReplayPlan plan = plan_replay(trace);
  const ReplayResult r = replay(plan, AllocatorConfig{}, kCapacity, {.timed_passes = 1});
  const double plan_seconds = bench::seconds_since(start);
  const double pass_seconds = r.ns_per_op * static_cast<double>(plan.ops.size()) * 1e-9;
  const double events_per_s = static_cast<double>(trace.size()) / std::max(plan_seconds, 1e-9);
  bench::report("lab_replay_requests", static_cast<double>(plan.ops.size()), "requests");
  bench::report("lab_replay_ns_per_request", r.ns_per_op, "ns");
  bench::report("lab_replay_timed_pass", pass_seconds, "s");
  bench::report("lab_replay_events_per_s", events_per_s, "events/s");
  ok = check("replay (plan, serving pass with statistics, timed pass) at least 10^6 events/s",
             events_per_s >= 1e6) && ok;

  // svg
  start = bench::Clock::now();
  const std::string svg = trace_to_svg(trace, contexts, "lab_scale_bench", kCapacity);
  bench::report("lab_svg_time", bench::seconds_since(start), "s");
  bench::report("lab_svg_size", static_cast<double>(svg.size()) / (1024.0 * 1024.0), "MiB");
  ok = check("SVG timeline at most 2 MB", svg.size() <= 2'000'000) && ok;

  // plot, as the user runs it
  if (lab_replay.empty()) {
    std::printf("lab_plot_time: n/a s (lab_replay is not built: examples off)\n");
  } else {
    char dir[] = "/tmp/lab_scale_XXXXXX";
    if (mkdtemp(dir) == nullptr) throw IoError("lab_scale_bench: cannot create a folder", dir);
    const std::string json = std::string(dir) + "/trace.json";
    write_file_atomically(json, trace_to_json(trace, contexts, "sim:0", "caching", kCapacity));
    start = bench::Clock::now();
    const std::string cmd = fmt::format("'{}' plot '{}' --out-dir '{}' > /dev/null", lab_replay,
                                        json, dir);
    const int status = std::system(cmd.c_str());
    const double seconds = bench::seconds_since(start);
    bench::report("lab_plot_time", seconds, "s");
    ok = check("lab plot at most 5 s", status == 0 && seconds <= 5.0) && ok;
    std::system(fmt::format("rm -rf '{}'", dir).c_str());
  }

  // import: a snapshot of about `pickle_mb` MB (more steps recorded if needed)
  char path[] = "/tmp/lab_scale_XXXXXX.pickle";
  const int fd = mkstemps(path, 7);
  if (fd < 0) throw IoError("lab_scale_bench: cannot create a temporary file", path);
  close(fd);
  {
    const size_t per_event = 47;  // bytes of pickle per trace event, about (measured)
    BoundedMemory big(kCapacity, "sim:0");
    std::unique_ptr<PolicyAllocator> b =
        record(big, static_cast<size_t>(pickle_mb * 1024 * 1024 / per_event));
    write_snapshot_file(path, memory_snapshot(*b, AllocatorConfig{}, 0));
  }
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    execl("/proc/self/exe", "lab_scale_bench", "--import", path, static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  std::remove(path);
  ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  size_t events = 1'000'000;
  double pickle_mb = 100.0;
  std::string lab_replay = MEMGRAD_LAB_REPLAY;  // the build's, when examples are built
  if (access(lab_replay.c_str(), X_OK) != 0) lab_replay.clear();
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--import" && i + 1 < argc) return import_only(argv[i + 1]);
      if (arg == "--quick") {
        events = 100'000;
        pickle_mb = 10.0;
      } else if (arg == "--lab-replay" && i + 1 < argc) {
        lab_replay = argv[++i];
      } else {
        std::fprintf(stderr, "usage: lab_scale_bench [--quick] [--lab-replay PATH] | "
                             "--import FILE\n");
        return 2;
      }
    }
    return run(events, pickle_mb, lab_replay);
  } catch (const memgrad::Error& e) {
    std::fprintf(stderr, "lab_scale_bench: error: %s\n", e.what());
    return 1;
  }
}
