// memgrad's trace JSON: the raw events, their contexts and the Chrome trace events Perfetto
// draws, written straight into one string.
#include "interop/trace_writer.h"

#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace memgrad {
namespace {

// A JSON string literal (quotes and escapes), as nlohmann writes it.
std::string json_string(std::string_view text) { return nlohmann::json(std::string(text)).dump(); }

// One Chrome "X" (complete) event per run of consecutive events in the same non-empty phase.
void add_phase_slices(std::string& out, const std::vector<TraceEvent>& events,
                      const std::vector<TraceContextRecord>& contexts,
                      const std::vector<std::string>& phases) {
  size_t begin = 0;
  for (size_t i = 1; i <= events.size(); ++i) {
    const std::string& phase = contexts[events[begin].context].phase;
    if (i < events.size() && contexts[events[i].context].phase == phase) continue;
    if (!phase.empty()) {
      const double ts = static_cast<double>(events[begin].time_ns) / 1e3;
      const double end = static_cast<double>(events[i - 1].time_ns) / 1e3;
      fmt::format_to(std::back_inserter(out),
                     ",{{\"cat\":\"phase\",\"dur\":{},\"name\":{},\"ph\":\"X\",\"pid\":1,"
                     "\"tid\":1,\"ts\":{}}}",
                     end - ts, phases[events[begin].context], ts);
    }
    begin = i;
  }
}

}  // namespace

std::string trace_to_json(const TraceRecorder& trace, std::string_view device,
                          std::string_view policy, size_t capacity) {
  return trace_to_json(trace.events(), trace.contexts(), device, policy, capacity, trace.names());
}

std::string trace_to_json(const std::vector<TraceEvent>& evs,
                          const std::vector<TraceContextRecord>& ctxs, std::string_view device,
                          std::string_view policy, size_t capacity,
                          const std::vector<TraceName>& names) {
  // Written directly rather than through a JSON document: a trace of a million events would
  // otherwise build and copy millions of small objects. Keys are in sorted order, as before.
  std::vector<std::string> phases, ops;  // the contexts' strings, quoted once
  for (const TraceContextRecord& c : ctxs) {
    phases.push_back(json_string(c.phase));
    ops.push_back(json_string(c.op));
  }
  // Formatted straight into the string returned (fmt appends to a std::string in place): a
  // buffer copied out at the end would cost a second 250 MB for 10^6 events. About 260 bytes
  // per event, reserved up front.
  std::string out;
  out.reserve(4096 + evs.size() * 272);
  auto to = [&out] { return std::back_inserter(out); };
  fmt::format_to(to(), "{{\"capacity\":{},\"contexts\":[", capacity);
  for (size_t i = 0; i < ctxs.size(); ++i) {
    fmt::format_to(to(), "{}{{\"label\":{},\"module\":{},\"op\":{},\"phase\":{}}}",
                   i == 0 ? "" : ",", json_string(ctxs[i].label), json_string(ctxs[i].module),
                   ops[i], phases[i]);
  }
  fmt::format_to(to(), "],\"device\":{},\"displayTimeUnit\":\"ns\",\"memgrad_events\":[",
                 json_string(device));
  for (size_t i = 0; i < evs.size(); ++i) {
    const TraceEvent& e = evs[i];
    fmt::format_to(to(),
                   "{}{{\"action\":\"{}\",\"addr\":{},\"allocated\":{},\"ctx\":{},"
                   "\"requested\":{},\"reserved\":{},\"size\":{},\"stream\":{},\"t_ns\":{}}}",
                   i == 0 ? "" : ",", trace_action_name(e.action), e.address, e.allocated,
                   e.context, e.requested, e.reserved, e.nbytes, e.stream, e.time_ns);
  }
  fmt::format_to(to(), "],\"memgrad_names\":[");
  for (size_t i = 0; i < names.size(); ++i) {
    fmt::format_to(to(), "{}{{\"addr\":{},\"event\":{},\"module\":{},\"role\":{}}}",
                   i == 0 ? "" : ",", names[i].address, names[i].event,
                   json_string(names[i].module), json_string(names[i].role));
  }
  fmt::format_to(to(),
                 "],\"memgrad_trace_version\":1,\"policy\":{},\"traceEvents\":[{{\"args\":"
                 "{{\"name\":{}}},\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1}}",
                 json_string(policy),
                 json_string(std::string(device) + " (" + std::string(policy) + " allocator)"));
  for (const TraceEvent& e : evs) {
    const double ts = static_cast<double>(e.time_ns) / 1e3;
    fmt::format_to(to(),
                   ",{{\"args\":{{\"allocated\":{},\"reserved\":{}}},\"name\":\"memory "
                   "(bytes)\",\"ph\":\"C\",\"pid\":1,\"ts\":{}}}",
                   e.allocated, e.reserved, ts);
    if (e.action == TraceAction::Oom || e.action == TraceAction::SegmentAlloc ||
        e.action == TraceAction::SegmentFree) {
      fmt::format_to(to(),
                     ",{{\"args\":{{\"op\":{},\"phase\":{},\"size\":{}}},\"name\":\"{}\","
                     "\"ph\":\"i\",\"pid\":1,\"s\":\"p\",\"tid\":1,\"ts\":{}}}",
                     ops[e.context], phases[e.context], e.nbytes, trace_action_name(e.action), ts);
    }
  }
  if (!evs.empty()) add_phase_slices(out, evs, ctxs, phases);
  fmt::format_to(to(), "]}}");
  return out;
}

}  // namespace memgrad
