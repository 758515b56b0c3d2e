// lab_replay: the allocator policy lab's tool (run by `./memgrad lab`, lab/cli/lab.py).
//
//   lab_replay replay TRACE [--policy A,B,...] [--capacity SIZE] [--timed-passes N]
//                           [--device N] [--validate]
//       serves the trace's requests with each policy on a fresh simulated device and prints
//       one row per policy: peak reserved and allocated, fragmentation (1 - allocated/reserved
//       at the peak of reserved, and averaged over requests) with its hard and soft parts
//       (allocator/fragmentation.h; the rest is other streams'), the rounding at the peak
//       (allocated - requested, inside live blocks), source calls, the first OOM
//       (with its trace event) and the time per request, then a conclusion from the rows.
//       TRACE is memgrad's trace JSON or a memory snapshot in PyTorch's format (pickle or
//       JSON, PyTorch's or memgrad's); what a snapshot's replay cannot model is printed as
//       notes. --validate replays it once more with the policy and settings it was recorded
//       with and compares every segment decision (segment_alloc, segment_free, segment_map,
//       segment_unmap: action and size, in order) and the peak reserved with the recorded ones:
//       "identical", or the first divergence with the events around it (exit status 4). A
//       snapshot with no history (segments, no events) is one line, "nothing to replay" (exit
//       status 0, or 3 with --validate: nothing was compared).
//   lab_replay plot TRACE [--out-dir DIR] [--policy P --capacity SIZE]
//       writes an SVG timeline (trace_to_svg) and a Chrome-trace JSON for Perfetto, of the
//       recorded trace or of its replay under policy P; prints the file names.
//   lab_replay layout [--out-dir DIR] [--summary-only]
//       serves a fixed request sequence with each policy and draws its segments and blocks
//       (docs/images/allocator-lab-<policy>.svg).
//   lab_replay plan TRACE [--out FILE]
//       the planned policy's plan of the trace's first step: its requests, the arena against the
//       ideal (the most bytes live at once), the same ratio for greedy by size on every step of
//       the trace; --out writes the plan file
//       (MEMGRAD_ALLOC_CONF=policy:planned,planned_plan:FILE).
//
// In `replay`, the planned policy plans from the replayed trace itself (its first step) and a
// line after the table says how many requests it served from the plan and why the others fell
// back.
//
// Everything but the times is deterministic: the simulated device's addresses are relative to
// its base, so the same trace gives the same table on every machine.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "allocator/bounded_memory.h"
#include "allocator/config.h"
#include "allocator/error.h"
#include "base/atomic_file.h"
#include "interop/snapshot_import.h"
#include "interop/trace_reader.h"
#include "interop/trace_svg.h"
#include "interop/trace_writer.h"
#include "lab/cli/lab_layout.h"
#include "lab/memory_plan.h"
#include "lab/plan_file.h"
#include "lab/policies/planned_allocator.h"
#include "lab/policy_registry.h"
#include "lab/trace_replay.h"

namespace {

using namespace memgrad;

constexpr size_t kLayoutCapacity = 64 * kMiB;

std::string mib(size_t nbytes) {
  return fmt::format("{:.2f} MiB", static_cast<double>(nbytes) / static_cast<double>(kMiB));
}

std::vector<std::string> split_policies(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string name = text.substr(start, end - start);
    name.erase(std::remove(name.begin(), name.end(), ' '), name.end());
    if (!name.empty()) out.push_back(name);
    start = end + 1;
  }
  return out;
}

// --capacity: a size as parse_memory_size reads it, at most what a simulated device can have.
size_t parse_capacity(const std::string& text) {
  const size_t nbytes = parse_memory_size(text, "--capacity");
  if (nbytes == 0 || nbytes > BoundedMemory::kMaxCapacity) {
    throw ConfigError(fmt::format("--capacity: '{}' must be more than 0 bytes and at most {} (what "
                                  "a simulated device can have)",
                                  text, format_size(BoundedMemory::kMaxCapacity)),
                      "capacity", text);
  }
  return nbytes;
}

// The capacity to replay on: the one asked for, else 4x the ideal peak (at least 64 MiB),
// rounded up to a MiB.
size_t choose_capacity(const std::string& flag, const ReplayPlan& plan) {
  if (!flag.empty()) return parse_capacity(flag);
  if (plan.ideal_peak > BoundedMemory::kMaxCapacity / 4) {
    throw ConfigError(
        fmt::format("the trace's ideal peak of {} needs a device of 4x that, more "
                    "than a simulated device can have (at most {}); pass "
                    "--capacity to replay it on a smaller one",
                    format_size(plan.ideal_peak), format_size(BoundedMemory::kMaxCapacity)),
        "capacity");
  }
  const size_t wanted = std::max<size_t>(4 * plan.ideal_peak, 64 * kMiB);
  return (wanted + kMiB - 1) / kMiB * kMiB;
}

std::vector<std::string> policies_or_all(const std::string& flag) {
  std::vector<std::string> names =
      split_policies(flag.empty() ? std::string(known_policies()) : flag);
  if (names.empty()) {
    throw ConfigError(
        fmt::format("--policy '{}' names no policy (known: {})", flag, known_policies()), "policy",
        flag);
  }
  return names;
}

// Creates `dir` (and its parents) or throws IoError naming it.
void make_directory(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    throw IoError(fmt::format("cannot create the folder '{}': {}", dir, error.message()), dir,
                  error.value());
  }
}

// ---- replay ----

// The configuration a replay of `path` uses for `policy`: planned plans from the trace itself
// (when the path can be written in MEMGRAD_ALLOC_CONF; otherwise it stays in its warm-up).
AllocatorConfig config_for(const std::string& policy, const std::string& path) {
  AllocatorConfig config = AllocatorConfig::parse("policy:" + policy);
  if (policy == "planned" && path.find_first_of(",:[] \t") == std::string::npos) {
    config.planned_plan = path;
  }
  return config;
}

// What the planned policy did in a replay, read from it before its blocks were freed.
struct PlannedReport {
  PlannedCounts counts;
  std::optional<MemoryPlan> plan;
};

ReplayOptions options_for(const std::string& policy, int timed_passes, PlannedReport& report) {
  ReplayOptions options{.timed_passes = timed_passes};
  if (policy == "planned") {
    options.inspect = [&report](const PolicyAllocator& a) {
      const auto& planned = dynamic_cast<const PlannedAllocator&>(a);
      report.counts = planned.planned_counts();
      report.plan = planned.plan();
    };
  }
  return options;
}

// "planned: ..." after the table: the plan, and what came from it.
void print_planned(const PlannedReport& report, const ReplayPlan& requests) {
  const PlannedCounts& c = report.counts;
  if (!report.plan) {
    fmt::print(
        "planned: no plan (a trace path MEMGRAD_ALLOC_CONF cannot hold, or no allocation "
        "to plan); all {} allocations went to the caching fallback\n",
        requests.allocs);
    return;
  }
  const MemoryPlan& p = *report.plan;
  fmt::print(
      "planned: plan of step {} of {} ({} requests, arena {}, {:.3f}x its ideal); {} of {} "
      "allocations from the plan in {} step{}",
      p.planned_step + 1, p.steps_recorded, p.requests.size(), mib(p.arena_nbytes),
      static_cast<double>(p.arena_nbytes) /
          static_cast<double>(std::max<size_t>(p.ideal_nbytes, 1)),
      c.planned, requests.allocs, c.steps, c.steps == 1 ? "" : "s");
  if (c.deviations() == 0 && c.unplanned == 0) {
    fmt::print(", none fell back\n");
    return;
  }
  std::string why;
  const auto add = [&](int64_t n, const char* what) {
    if (n > 0) why += fmt::format("{}{} {}", why.empty() ? "" : ", ", n, what);
  };
  add(c.mismatch, "not in the plan's sequence");
  add(c.late_free, "behind a late free");
  add(c.copies_busy, "with every copy live");
  add(c.other_stream, "on another stream");
  add(c.no_arena, "without an arena");
  add(c.unplanned, "before a plan");
  fmt::print("; {} fell back to caching ({})\n", c.deviations() + c.unplanned, why);
}

// "37.5% (25.0+12.5)": the share of reserved not allocated, and its hard and soft parts.
std::string share(double total, double hard, double soft) {
  return fmt::format("{:.1f}% ({:.1f}+{:.1f})", 100.0 * total, 100.0 * hard, 100.0 * soft);
}

void print_row(const ReplayResult& r) {
  const std::string result =
      r.oom ? fmt::format("OOM at event {}", r.oom_event) : std::string("ok");
  const FragmentationReport& f = r.fragmentation_report_at_peak;
  const double reserved = static_cast<double>(std::max<size_t>(f.reserved, 1));
  fmt::print("{:<12} {:>14} {:>15} {:>22} {:>22} {:>14} {:>13} {:<18} {:.0f} ns\n", r.policy,
             mib(r.peak_reserved), mib(r.peak_allocated),
             share(r.fragmentation_at_peak, static_cast<double>(f.hard) / reserved,
                   static_cast<double>(f.soft) / reserved),
             share(r.fragmentation_mean, r.hard_mean, r.soft_mean), format_size(f.rounding),
             r.source_calls, result, r.ns_per_op);
}

// One sentence from the rows: who reserved least and most at the peak (against the ideal), who
// called the source least and most, and who ran out of memory.
void print_conclusion(const std::vector<ReplayResult>& rows, const ReplayPlan& plan) {
  std::vector<const ReplayResult*> served;
  std::vector<std::string> ooms;
  for (const ReplayResult& r : rows) {
    if (r.oom) {
      ooms.push_back(fmt::format("{} (event {})", r.policy, r.oom_event));
    } else {
      served.push_back(&r);
    }
  }
  std::string text;
  const double ideal = static_cast<double>(std::max<size_t>(plan.ideal_peak, 1));
  const auto peak_of = [&](const ReplayResult* r) {  // "8.18 MiB, 1.00x the ideal"
    return fmt::format("{}, {:.2f}x the ideal", mib(r->peak_reserved),
                       static_cast<double>(r->peak_reserved) / ideal);
  };
  if (served.size() == 1) {
    text = fmt::format("only {} served the whole trace (peak reserved {})", served[0]->policy,
                       peak_of(served[0]));
  } else if (!served.empty()) {
    const auto by_peak = [](const ReplayResult* a, const ReplayResult* b) {
      return a->peak_reserved < b->peak_reserved;
    };
    const auto by_calls = [](const ReplayResult* a, const ReplayResult* b) {
      return a->source_calls < b->source_calls;
    };
    const ReplayResult* least = *std::min_element(served.begin(), served.end(), by_peak);
    const ReplayResult* most = *std::max_element(served.begin(), served.end(), by_peak);
    const ReplayResult* fewest = *std::min_element(served.begin(), served.end(), by_calls);
    const ReplayResult* most_calls = *std::max_element(served.begin(), served.end(), by_calls);
    text = fmt::format(
        "{}{} reserved the least at its peak ({}), {} the most ({}); {} called the source "
        "least ({} call{}), {} most ({})",
        ooms.empty() ? "" : "of the policies that served the whole trace, ", least->policy,
        peak_of(least), most->policy, peak_of(most), fewest->policy, fewest->source_calls,
        fewest->source_calls == 1 ? "" : "s", most_calls->policy, most_calls->source_calls);
  }
  if (ooms.empty()) {
    text += served.empty() ? "no policy served the trace" : "; none ran out of memory";
  } else {
    std::string list;
    for (const std::string& o : ooms) list += (list.empty() ? "" : ", ") + o;
    text += fmt::format("{}out of memory: {}", text.empty() ? "" : "; ", list);
  }
  fmt::print("conclusion: {}.\n", text);
}

// A trace or a snapshot, read as requests. For a snapshot, `imported` gets what the import found.
RecordedTrace read_requests(const std::string& path, std::optional<int> device,
                            ImportedSnapshot& imported) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw IoError(fmt::format("cannot read '{}'", path), path, errno);
  std::string head(4096, '\0');
  file.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(file.gcount()));
  if (!is_snapshot_bytes(head)) {
    RecordedTrace trace = read_trace_file(path);
    imported.history_events = trace.events.size();
    imported.config = AllocatorConfig::parse("policy:" + trace.policy);
    imported.capacity = trace.capacity;
    for (const TraceEvent& e : trace.events) {
      const bool segment =
          e.action == TraceAction::SegmentAlloc || e.action == TraceAction::SegmentFree ||
          e.action == TraceAction::SegmentMap || e.action == TraceAction::SegmentUnmap;
      if (segment) imported.recorded_segments.push_back(e);
      if (e.action == TraceAction::Oom && !imported.recorded_oom) {
        imported.recorded_oom = true;
        imported.segments_before_oom = imported.recorded_segments.size();
      }
      imported.recorded_peak_reserved =
          std::max(imported.recorded_peak_reserved, static_cast<size_t>(e.reserved));
    }
    return trace;
  }
  imported = import_snapshot_file(path, device);
  RecordedTrace trace;
  trace.device = imported.device_name;
  trace.policy = imported.config.policy;
  trace.capacity = imported.capacity;
  trace.events = std::move(imported.events);
  trace.contexts = imported.contexts;
  if (imported.start) {
    size_t blocks = 0, allocated = 0, reserved = 0;
    for (const SeedSegment& seg : imported.start->segments) {
      reserved += seg.nbytes;
      for (const SeedBlock& b : seg.blocks) {
        blocks += b.allocated ? 1 : 0;
        allocated += b.allocated ? b.nbytes : 0;
      }
    }
    fmt::print(
        "start state: {} segments ({}), {} blocks allocated ({}), {} free in them: the final "
        "segments walked back through the history\n",
        imported.start->segments.size(), mib(reserved), blocks, mib(allocated),
        mib(reserved - allocated));
  } else if (imported.live_before_history > 0 && !imported.start_note.empty()) {
    fmt::print(
        "note: the start state is not rebuilt ({}): --validate compares from the first "
        "segment event after the blocks from before the history\n",
        imported.start_note);
  }
  for (const std::string& note : imported.notes) fmt::print("note: {}\n", note);
  if (imported.failed_requests > 0) {
    fmt::print(
        "note: {} request{} ran out of memory in the recording: replayed as requests, "
        "never freed\n",
        imported.failed_requests, imported.failed_requests == 1 ? "" : "s");
  }
  if (imported.live_before_history > 0) {
    fmt::print(
        "note: {} blocks were live before the history began: allocated first, at time "
        "zero\n",
        imported.live_before_history);
  }
  return trace;
}

// The recorded segments' places relative to the lowest of them, in the order the replay obtains
// them: the start state's, then each segment_alloc's. Among equal free blocks the caching
// allocator takes the lowest address, so the replay follows the recorded order by address.
std::vector<std::pair<size_t, size_t>> recorded_placements(const StartState& start,
                                                           const ImportedSnapshot& imported) {
  std::vector<std::pair<uint64_t, uint64_t>> recorded;
  for (size_t i = 0; i < start.segments.size(); ++i) {
    recorded.emplace_back(start.addresses[i], start.segments[i].nbytes);
  }
  for (const TraceEvent& e : imported.recorded_segments) {
    if (e.action == TraceAction::SegmentAlloc) recorded.emplace_back(e.address, e.nbytes);
  }
  uint64_t lowest = UINT64_MAX;
  for (const auto& [address, nbytes] : recorded) lowest = std::min(lowest, address);
  std::vector<std::pair<size_t, size_t>> placements;
  for (const auto& [address, nbytes] : recorded) placements.emplace_back(address - lowest, nbytes);
  return placements;
}

// Replays `plan` with the recording's own policy and settings and compares its segment
// decisions with the recorded ones. Returns 0 when identical, 4 otherwise.
int validate(const ReplayPlan& plan, const RecordedTrace& trace, const ImportedSnapshot& imported,
             size_t capacity) {
  // From the recorded start state when it was rebuilt (the trace then starts after it); else the
  // blocks from before the history come first, and the replay's events up to its last
  // allocation of such a block are not compared (the recording has no events for them).
  const StartState* start = imported.start ? &*imported.start : nullptr;
  const ReplayResult r = replay(plan, imported.config, capacity,
                                {.record_trace = true,
                                 .start = start,
                                 .placements = start ? recorded_placements(*start, imported)
                                                     : std::vector<std::pair<size_t, size_t>>{}});
  if (!r.start_refused.empty()) {
    fmt::print("\nvalidate: not compared: {}\n", r.start_refused);
    return 4;
  }
  std::vector<TraceEvent> replayed;
  size_t allocs = 0;
  for (const TraceEvent& e : r.events) {
    if (start != nullptr || allocs >= imported.live_before_history) replayed.push_back(e);
    if (e.action == TraceAction::Alloc) ++allocs;
  }
  size_t segment_events = 0;
  for (const TraceEvent& e : replayed) {
    segment_events += e.action == TraceAction::SegmentAlloc ||
                      e.action == TraceAction::SegmentFree || e.action == TraceAction::SegmentMap ||
                      e.action == TraceAction::SegmentUnmap;
  }
  const bool on_recorded = capacity == imported.capacity;
  fmt::print("\nvalidate: replayed with {} ({}) on {}\n", imported.config.policy,
             imported.config.to_string(),
             on_recorded ? fmt::format("{}'s recorded capacity", trace.device)
                         : fmt::format("a simulated {}", mib(capacity)));
  // A recording that ran out of memory: the replay must run out at the same request, with the
  // same segment decisions up to there (it stops at its OOM; the recording went on).
  std::vector<TraceEvent> recorded = imported.recorded_segments;
  if (imported.recorded_oom && r.oom) {
    recorded.resize(imported.segments_before_oom);
    fmt::print("validate: the replay ran out of memory at event {}, as the recording did\n",
               r.oom_event);
  } else if (r.oom != imported.recorded_oom) {
    fmt::print("validate: the replay {} out of memory{}; the recording {}\n",
               r.oom ? "ran" : "did not run", r.oom ? fmt::format(" at event {}", r.oom_event) : "",
               imported.recorded_oom ? "did" : "did not");
  }
  const std::optional<SegmentDivergence> d = compare_segments(recorded, replayed);
  const bool same_peak = (start == nullptr && imported.live_before_history > 0) ||
                         r.peak_reserved == imported.recorded_peak_reserved;
  if (!d && same_peak && r.oom == imported.recorded_oom) {
    fmt::print(
        "validate: identical: {} segment events (action and size, in order), peak reserved "
        "{} as recorded\n",
        segment_events, mib(r.peak_reserved));
    return 0;
  }
  if (d) {
    fmt::print("validate: diverges at segment event #{}: recorded {}, replayed {}\n", d->index,
               d->expected, d->got);
    for (const std::string& line : d->context) fmt::print("{}\n", line);
  }
  if (!same_peak) {
    fmt::print("validate: peak reserved {} replayed, {} recorded\n", mib(r.peak_reserved),
               mib(imported.recorded_peak_reserved));
  }
  return 4;
}

int cmd_replay(const std::string& path, const std::string& policy_flag,
               const std::string& capacity_flag, int timed_passes, std::optional<int> device,
               bool validate_flag) {
  ImportedSnapshot imported;
  const RecordedTrace trace = read_requests(path, device, imported);
  if (imported.history_events == 0) {
    // Segments and blocks but no events: PyTorch's _snapshot() without _record_memory_history.
    if (imported.device_name.empty()) {
      fmt::print("trace {}: no events: nothing to replay\n", path);
    } else {
      fmt::print(
          "snapshot {} (device {}): {} segments, {} reserved, {} blocks allocated, and no "
          "history (device_traces[{}] has no events; PyTorch records them after "
          "torch.cuda.memory._record_memory_history()): nothing to replay\n",
          path, trace.device, imported.segments_at_end, mib(imported.reserved_at_end),
          imported.live_before_history, imported.device);
    }
    return validate_flag ? 3 : 0;  // nothing was validated
  }
  const ReplayPlan plan = plan_replay(trace.events);
  // A recording that ran out of memory is replayed on its own device's size when known: that
  // size decided the OOM. Otherwise on 4x the ideal peak, the same on every machine.
  const bool recorded_fits =
      imported.capacity > 0 && imported.capacity <= BoundedMemory::kMaxCapacity;
  const size_t capacity = capacity_flag.empty() && imported.recorded_oom && recorded_fits
                              ? imported.capacity
                              : choose_capacity(capacity_flag, plan);
  fmt::print("trace {} (device {}, recorded with {}): {} events, {} allocs, {} frees", path,
             trace.device, trace.policy, trace.events.size(), plan.allocs, plan.frees);
  if (plan.live_at_end > 0) fmt::print(" ({} blocks live at the end)", plan.live_at_end);
  if (plan.unmatched_frees > 0) {
    fmt::print(" ({} frees of blocks from before the trace skipped)", plan.unmatched_frees);
  }
  fmt::print("\nideal peak (most requested bytes live at once): {}\n", mib(plan.ideal_peak));
  fmt::print("each policy serves the same requests on a fresh simulated device of {}\n\n",
             mib(capacity));
  fmt::print("{:<12} {:>14} {:>15} {:>22} {:>22} {:>14} {:>13} {:<18} {}\n", "policy",
             "peak reserved", "peak allocated", "frag@peak (hard+soft)", "frag mean (hard+soft)",
             "rounding@peak", "source calls", "result", "time per request");
  std::vector<ReplayResult> rows;
  std::optional<PlannedReport> planned;
  for (const std::string& policy : policies_or_all(policy_flag)) {
    PlannedReport report;
    rows.push_back(replay(plan, config_for(policy, path), capacity,
                          options_for(policy, timed_passes, report)));
    print_row(rows.back());
    if (policy == "planned") planned = report;
  }
  fmt::print("\n");
  if (planned) print_planned(*planned, plan);
  print_conclusion(rows, plan);
  if (!validate_flag) return 0;
  // The recording's device when its size is known (its OOM retries depend on it), else the
  // table's.
  return validate(plan, trace, imported,
                  capacity_flag.empty() && recorded_fits ? imported.capacity : capacity);
}

// ---- plot ----

void write_file(const std::filesystem::path& path, const std::string& text) {
  write_file_atomically(path.string(), text);
}

int cmd_plot(const std::string& path, const std::string& out_dir, const std::string& policy,
             const std::string& capacity_flag) {
  const RecordedTrace trace = read_trace_file(path);
  const std::vector<TraceEvent>* events = &trace.events;
  const std::vector<TraceContextRecord>* contexts = &trace.contexts;
  ReplayResult replayed;  // with --policy
  std::string stem = std::filesystem::path(path).stem().string();
  std::string title = fmt::format("{}: {} on {} ({} events)", stem, trace.policy, trace.device,
                                  trace.events.size());
  std::string shown_policy = trace.policy;
  size_t capacity = trace.capacity;
  if (!policy.empty()) {
    const ReplayPlan plan = plan_replay(trace.events);
    capacity = choose_capacity(capacity_flag, plan);
    replayed = replay(plan, config_for(policy, path), capacity,
                      {.record_trace = true, .contexts = &trace.contexts});
    const ReplayResult& r = replayed;
    events = &r.events;
    contexts = &r.event_contexts;
    stem += "." + policy;
    shown_policy = policy;
    title = fmt::format("{}: replayed with {} on a simulated {}{}",
                        std::filesystem::path(path).stem().string(), policy, mib(capacity),
                        r.oom ? fmt::format(" (OOM at event {})", r.oom_event) : std::string());
  }
  make_directory(out_dir);
  const std::filesystem::path svg = std::filesystem::path(out_dir) / (stem + ".svg");
  const std::filesystem::path json = std::filesystem::path(out_dir) / (stem + ".perfetto.json");
  write_file(svg, trace_to_svg(*events, *contexts, title, capacity));
  write_file(json, trace_to_json(*events, *contexts, trace.device, shown_policy, capacity));
  fmt::print("timeline (SVG): {}\nChrome trace (open in https://ui.perfetto.dev): {}\n",
             svg.string(), json.string());
  return 0;
}

// ---- plan ----

int cmd_plan(const std::string& path, const std::string& out) {
  ImportedSnapshot imported;
  const RecordedTrace trace = read_requests(path, std::nullopt, imported);
  const std::vector<RecordedStep> steps = steps_of_trace(trace);
  std::string counts;
  for (const RecordedStep& s : steps) {
    const auto allocs =
        std::count_if(s.begin(), s.end(), [](const StepEvent& e) { return e.alloc; });
    counts += fmt::format("{}{}", counts.empty() ? "" : ", ", allocs);
  }
  fmt::print("trace {}: {} step{} ({} allocations)\n", path, steps.size(),
             steps.size() == 1 ? "" : "s", counts);
  const MemoryPlan plan = plan_trace(trace, path);
  size_t outliving = 0, one_time = 0, copied = 0;
  for (const PlannedRequest& r : plan.requests) {
    outliving += r.outlives();
    one_time += r.one_time;
    copied += r.offsets.size() > 1;
  }
  const auto ratio = [](const MemoryPlan& p) {
    return static_cast<double>(p.arena_nbytes) /
           static_cast<double>(std::max<size_t>(p.ideal_nbytes, 1));
  };
  fmt::print(
      "plan of step 1 (what policy:planned serves): {} requests, {} outlive the step ({} "
      "made by the first step only, {} with several copies); arena {}, ideal {} ({:.4f}x)\n",
      plan.requests.size(), outliving, one_time, copied, mib(plan.arena_nbytes),
      mib(plan.ideal_nbytes), ratio(plan));
  std::string each;
  for (size_t t = 0; t < steps.size(); ++t) {
    const bool any =
        std::any_of(steps[t].begin(), steps[t].end(), [](const StepEvent& e) { return e.alloc; });
    if (!any) continue;
    each += fmt::format("{}step {} {:.4f}x", each.empty() ? "" : ", ", t + 1,
                        ratio(plan_recording(steps, t)));
  }
  fmt::print("greedy by size, arena / ideal, planning each step: {}\n", each);
  if (!out.empty()) {
    write_file_atomically(out, plan_to_json(plan));
    fmt::print("plan written to {} (MEMGRAD_ALLOC_CONF=policy:planned,planned_plan:{})\n", out,
               out);
  }
  return 0;
}

// ---- layout ----

int cmd_layout(const std::string& out_dir, bool summary_only) {
  fmt::print("the fixed sequence: {}\n\n", lab::layout_sequence_text());
  fmt::print("{:<12} {:>8} {:>14} {:>14} {:>14}\n", "policy", "segments", "reserved", "allocated",
             "requested");
  for (const std::string& policy : policies_or_all("")) {
    BoundedMemory memory(kLayoutCapacity, "sim:0");
    // The planned policy serves the sequence from the sequence's own plan.
    std::unique_ptr<PolicyAllocator> alloc =
        policy == "planned" ? std::make_unique<PlannedAllocator>(
                                  memory, plan_recording({lab::layout_sequence_step()}, 0))
                            : make_allocator(AllocatorConfig::parse("policy:" + policy), memory);
    const std::vector<SegmentSnapshot> snap = lab::run_layout_sequence(*alloc);
    size_t reserved = 0, allocated = 0, requested = 0;
    for (const SegmentSnapshot& seg : snap) {
      reserved += seg.nbytes;
      for (const BlockSnapshot& b : seg.blocks) {
        allocated += b.allocated ? b.nbytes : 0;
        requested += b.allocated ? b.requested : 0;
      }
    }
    fmt::print("{:<12} {:>8} {:>14} {:>14} {:>14}\n", policy, snap.size(), mib(reserved),
               mib(allocated), mib(requested));
    if (summary_only) continue;
    make_directory(out_dir);
    const std::filesystem::path file =
        std::filesystem::path(out_dir) / fmt::format("allocator-lab-{}.svg", policy);
    write_file(file, lab::snapshot_to_svg(
                         snap, fmt::format("policy:{} after the fixed sequence", policy)));
  }
  if (!summary_only) fmt::print("\npictures written to {}/allocator-lab-<policy>.svg\n", out_dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "The allocator policy lab: replay a recorded trace through the policies, plot "
      "it, draw each policy's layout."};
  bool describe = false;
  app.add_flag("--describe", describe, "Print a one-line description and exit");
  std::string trace, policy, capacity, out_dir;
  int timed_passes = 3;
  bool summary_only = false;
  CLI::App* replay_cmd = app.add_subcommand("replay", "Replay a trace through each policy");
  replay_cmd->add_option("trace", trace, "A trace JSON (MEMGRAD_TRACE, ./memgrad lab record)")
      ->required();
  replay_cmd->add_option("--policy", policy, "Comma-separated policies (default: all)");
  replay_cmd->add_option("--capacity", capacity,
                         "Simulated device capacity, e.g. 256MiB (default: 4x the ideal peak)");
  replay_cmd->add_option("--timed-passes", timed_passes, "Timed passes per policy (best is shown)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  std::optional<int> device;
  bool validate_flag = false;
  replay_cmd->add_option("--device", device,
                         "A snapshot's device to replay (default: the one "
                         "with the most events)");
  replay_cmd->add_flag("--validate", validate_flag,
                       "Replay with the recording's policy and settings and compare its segment "
                       "decisions with the recorded ones");
  CLI::App* plot_cmd = app.add_subcommand("plot", "Write an SVG timeline and a Perfetto JSON");
  plot_cmd->add_option("trace", trace, "A trace JSON")->required();
  plot_cmd->add_option("--out-dir", out_dir,
                       "Where to write the files (default: next to the trace)");
  plot_cmd->add_option("--policy", policy, "Plot the trace replayed with this policy");
  plot_cmd->add_option("--capacity", capacity,
                       "Capacity for --policy (default: 4x the ideal peak)");
  std::string plan_out;
  CLI::App* plan_cmd =
      app.add_subcommand("plan", "The planned policy's plan of a trace's first step");
  plan_cmd->add_option("trace", trace, "A trace JSON or a memory snapshot")->required();
  plan_cmd->add_option("--out", plan_out, "Write the plan file here");
  CLI::App* layout_cmd =
      app.add_subcommand("layout", "Draw each policy's layout after a fixed sequence");
  out_dir = "docs/images";
  layout_cmd->add_option("--out-dir", out_dir, "Where to write the pictures")
      ->capture_default_str();
  layout_cmd->add_flag("--summary-only", summary_only, "Print the table, write no pictures");
  CLI11_PARSE(app, argc, argv);
  if (describe) {
    fmt::print(
        "the allocator policy lab: replay a trace through every policy, plot it, draw "
        "layouts (./memgrad lab)\n");
    return 0;
  }
  try {
    if (*replay_cmd) {
      return cmd_replay(trace, policy, capacity, timed_passes, device, validate_flag);
    }
    if (*plot_cmd) {
      const std::string dir = plot_cmd->count("--out-dir") > 0
                                  ? out_dir
                                  : std::filesystem::path(trace).parent_path().string();
      return cmd_plot(trace, dir.empty() ? "." : dir, policy, capacity);
    }
    if (*layout_cmd) return cmd_layout(out_dir, summary_only);
    if (*plan_cmd) return cmd_plan(trace, plan_out);
    fmt::print("{}", app.help());
    return 2;
  } catch (const std::exception& e) {  // memgrad's errors, and std's (bad_alloc) all the same
    std::fprintf(stderr, "lab_replay: error: %s\n", e.what());
    return 1;
  }
}
