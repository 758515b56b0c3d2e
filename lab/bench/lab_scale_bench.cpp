// lab_scale_bench: the policy lab on a trace of a million events, against its targets.
//
// A training-like request stream (steps of 40 tensors of mixed sizes, freed in another order)
// is recorded by the caching policy on a simulated device until the trace holds at least 10^6
// events. Then:
//   replay      the trace's requests served by the caching policy again: events per second,
//               the plan and one pass over it (target: at least 10^6 events/s);
//   svg         trace_to_svg of all events: bytes and seconds (target: at most 2 MB), and
//               whether the downsampling to pixel columns kept every peak: the highest point of
//               each line, read back through the byte axis, is the trace's peak reserved
//               (allocated) bytes, to the SVG's resolution;
//   plot        `lab_replay plot` of the trace written as JSON, as a user runs it: seconds
//               (target: at most 5 s), and whether the Perfetto JSON it writes stays complete:
//               valid JSON with one counter event per trace event and one marker per segment
//               alloc, segment free and OOM;
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
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "allocator/bounded_memory.h"
#include "allocator/error.h"
#include "base/atomic_file.h"
#include "bench/bench_util.h"
#include "interop/memory_snapshot.h"
#include "interop/snapshot_import.h"
#include "interop/trace_svg.h"
#include "interop/trace_writer.h"
#include "lab/policy_registry.h"
#include "lab/trace_replay.h"

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

// ---- what the SVG plots, read back ----

// A number of bytes as trace_svg.cpp writes a tick label: "0", "512 B", "1.5 GiB".
std::optional<double> tick_bytes(const std::string& label) {
  if (label == "0") return 0.0;
  char* end = nullptr;
  const double v = std::strtod(label.c_str(), &end);
  const std::string unit = end == nullptr ? "" : std::string(end);
  if (unit == " B") return v;
  if (unit == " KiB") return v * 1024.0;
  if (unit == " MiB") return v * 1024.0 * 1024.0;
  if (unit == " GiB") return v * 1024.0 * 1024.0 * 1024.0;
  return std::nullopt;
}

// The bytes at the highest point of the SVG line of class `cls` ("reserved" or "allocated"),
// read back through the byte axis (the zero grid line and the highest tick), and the most that
// reading can be off by the rounding of the coordinates written (1/100 px on the line, 1/10 px on
// the ticks). nullopt when the SVG has no such line or axis.
struct PlottedTop {
  double bytes = 0.0;
  double error = 0.0;
};
std::optional<PlottedTop> plotted_top(const std::string& svg, const std::string& cls) {
  double zero_y = -1.0, tick_y = 0.0, tick_value = 0.0;
  for (size_t grid = svg.find("class=\"grid\""); grid != std::string::npos;
       grid = svg.find("class=\"grid\"", grid + 1)) {
    const double y = std::strtod(svg.c_str() + svg.rfind("y1=\"", grid) + 4, nullptr);
    const size_t label = svg.find("text-anchor=\"end\">", grid);
    if (label == std::string::npos) return std::nullopt;
    const size_t from = label + 18;
    const std::optional<double> value = tick_bytes(svg.substr(from, svg.find('<', from) - from));
    if (!value) return std::nullopt;
    if (*value == 0.0) zero_y = y;
    if (*value > tick_value) {
      tick_value = *value;
      tick_y = y;
    }
  }
  const size_t end = svg.find("\" class=\"" + cls + "\"/>");
  if (zero_y < 0.0 || tick_value == 0.0 || end == std::string::npos) return std::nullopt;
  const size_t begin = svg.rfind("<path d=\"", end) + 9;
  const std::string d = svg.substr(begin, end - begin);
  double top = std::strtod(d.c_str() + d.find(',') + 1, nullptr);  // the M point's y
  for (size_t v = d.find('V'); v != std::string::npos; v = d.find('V', v + 1)) {
    top = std::min(top, std::strtod(d.c_str() + v + 1, nullptr));
  }
  const double per_px = tick_value / (zero_y - tick_y);
  const double bytes = (zero_y - top) * per_px;
  return PlottedTop{bytes, 0.005 * per_px + bytes * 0.05 / (zero_y - tick_y)};
}

// Whether the highest point the SVG plots for `cls` is `peak` bytes; prints both.
bool keeps_peak(const std::string& svg, const std::string& cls, int64_t peak) {
  const std::optional<PlottedTop> top = plotted_top(svg, cls);
  const double mib = 1024.0 * 1024.0;
  if (!top) {
    fmt::print("lab_svg_{}_top: n/a (no {} line or byte axis in the SVG)\n", cls, cls);
    return false;
  }
  fmt::print("lab_svg_{}_top: {:.3f} MiB (the trace's peak {:.3f} MiB, read to +-{:.3f} MiB)\n",
             cls, top->bytes / mib, static_cast<double>(peak) / mib, top->error / mib);
  return std::abs(top->bytes - static_cast<double>(peak)) <= top->error;
}

// ---- what the Perfetto JSON holds, counted ----

// Counts the Chrome-trace events of a Perfetto JSON by their "ph" while a SAX parser reads the
// file (at 10^6 events its document tree would take gigabytes): "C" counters, "i" markers.
class PhaseCounter : public nlohmann::json_sax<nlohmann::json> {
 public:
  size_t counters = 0;
  size_t markers = 0;

  bool key(string_t& k) override {
    ph_next_ = k == "ph";
    return true;
  }
  bool string(string_t& v) override {
    if (ph_next_) {
      counters += v == "C";
      markers += v == "i";
    }
    return value();
  }
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return value(); }
  bool end_object() override { return value(); }
  bool start_array(std::size_t) override { return value(); }
  bool end_array() override { return value(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool value() {
    ph_next_ = false;
    return true;
  }
  bool ph_next_ = false;
};

// Whether the Perfetto JSON at `path` is whole: valid JSON, a counter event per trace event and
// a marker per segment alloc, segment free and OOM, as trace_to_json writes them.
bool perfetto_complete(const std::string& path, const std::vector<TraceEvent>& trace) {
  size_t markers = 0;
  for (const TraceEvent& e : trace) {
    markers += e.action == TraceAction::SegmentAlloc || e.action == TraceAction::SegmentFree ||
               e.action == TraceAction::Oom;
  }
  std::ifstream file(path, std::ios::binary);
  PhaseCounter counted;
  const bool valid = file && nlohmann::json::sax_parse(file, &counted);
  fmt::print(
      "lab_plot_perfetto_events: {} counters for {} trace events, {} markers for {} "
      "segment allocs, frees and OOMs{}\n",
      counted.counters, trace.size(), counted.markers, markers, valid ? "" : " (not valid JSON)");
  return valid && counted.counters == trace.size() && counted.markers == markers;
}

// The child: read and import FILE, report time and peak memory against its size.
int import_only(const char* path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const double file_mib = static_cast<double>(in.tellg()) / (1024.0 * 1024.0);
  const auto start = bench::Clock::now();
  const ImportedSnapshot s = import_snapshot_file(path);
  const double seconds = bench::seconds_since(start);
  const double peak = bench::peak_rss_mib();
  bench::report("lab_import_file_size", file_mib, "MiB");
  bench::report("lab_import_events", static_cast<double>(s.events.size()), "events");
  bench::report("lab_import_time", seconds, "s");
  bench::report("lab_import_peak_rss", peak, "MiB");
  bench::report("lab_import_rss_ratio", peak / file_mib, "x");
  const bool fast =
      check(fmt::format("import {:.0f} MiB in at most 10 s", file_mib).c_str(), seconds <= 10.0);
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
             events_per_s >= 1e6) &&
       ok;

  // svg
  start = bench::Clock::now();
  const std::string svg = trace_to_svg(trace, contexts, "lab_scale_bench", kCapacity);
  bench::report("lab_svg_time", bench::seconds_since(start), "s");
  bench::report("lab_svg_size", static_cast<double>(svg.size()) / (1024.0 * 1024.0), "MiB");
  ok = check("SVG timeline at most 2 MB", svg.size() <= 2'000'000) && ok;
  int64_t peak_reserved = 0, peak_allocated = 0;
  for (const TraceEvent& e : trace) {
    peak_reserved = std::max(peak_reserved, e.reserved);
    peak_allocated = std::max(peak_allocated, e.allocated);
  }
  const bool reserved_kept = keeps_peak(svg, "reserved", peak_reserved);
  const bool allocated_kept = keeps_peak(svg, "allocated", peak_allocated);
  ok = check("SVG's highest points are the trace's peaks (reserved, allocated)",
             reserved_kept && allocated_kept) &&
       ok;

  // plot, as the user runs it
  if (lab_replay.empty()) {
    std::printf("lab_plot_time: n/a s (lab_replay is not built: examples off)\n");
  } else {
    char dir[] = "/tmp/lab_scale_XXXXXX";
    if (mkdtemp(dir) == nullptr) throw IoError("lab_scale_bench: cannot create a folder", dir);
    const std::string json = std::string(dir) + "/trace.json";
    write_file_atomically(json, trace_to_json(trace, contexts, "sim:0", "caching", kCapacity));
    start = bench::Clock::now();
    const std::string cmd =
        fmt::format("'{}' plot '{}' --out-dir '{}' > /dev/null", lab_replay, json, dir);
    const int status = std::system(cmd.c_str());
    const double seconds = bench::seconds_since(start);
    bench::report("lab_plot_time", seconds, "s");
    ok = check("lab plot at most 5 s", status == 0 && seconds <= 5.0) && ok;
    ok =
        check("lab plot's Perfetto JSON complete",
              status == 0 && perfetto_complete(std::string(dir) + "/trace.perfetto.json", trace)) &&
        ok;
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
        std::fprintf(stderr,
                     "usage: lab_scale_bench [--quick] [--lab-replay PATH] | "
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
