// TraceRecorder: a mutex-guarded ring of events, interned contexts, and the JSON dump.
#include "allocator/trace.h"

#include <chrono>
#include <iterator>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace memgrad {
namespace {

thread_local TraceContext t_context;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Chrome trace "X" slices for consecutive events that share a phase.
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

std::string_view trace_action_name(TraceAction action) {
  switch (action) {
    case TraceAction::Alloc: return "alloc";
    case TraceAction::FreeRequested: return "free_requested";
    case TraceAction::FreeCompleted: return "free_completed";
    case TraceAction::SegmentAlloc: return "segment_alloc";
    case TraceAction::SegmentFree: return "segment_free";
    case TraceAction::SegmentMap: return "segment_map";
    case TraceAction::SegmentUnmap: return "segment_unmap";
    case TraceAction::Oom: return "oom";
    case TraceAction::EmptyCache: return "empty_cache";
    case TraceAction::Snapshot: return "snapshot";
  }
  return "unknown";
}

const TraceContext& current_trace_context() { return t_context; }

TracePhaseScope::TracePhaseScope(const char* phase) : previous_(t_context.phase) {
  t_context.phase = phase;
}
TracePhaseScope::~TracePhaseScope() { t_context.phase = previous_; }

TraceOpScope::TraceOpScope(const char* op) : previous_(t_context.op) { t_context.op = op; }
TraceOpScope::~TraceOpScope() { t_context.op = previous_; }

TraceLabelScope::TraceLabelScope(std::string label) : previous_(std::move(t_context.label)) {
  t_context.label = std::move(label);
}
TraceLabelScope::~TraceLabelScope() { t_context.label = std::move(previous_); }

TraceRecorder::TraceRecorder() = default;

void TraceRecorder::enable(size_t max_entries) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.clear();
  contexts_.clear();
  next_ = 0;
  overflowed_ = false;
  max_entries_ = max_entries == 0 ? 1 : max_entries;
  start_ns_ = now_ns();
  enabled_.store(true, std::memory_order_relaxed);
}

void TraceRecorder::disable() { enabled_.store(false, std::memory_order_relaxed); }

void TraceRecorder::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.clear();
  contexts_.clear();
  next_ = 0;
  overflowed_ = false;
}

bool TraceRecorder::overflowed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return overflowed_;
}

size_t TraceRecorder::max_entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return max_entries_;
}

size_t TraceRecorder::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

uint32_t TraceRecorder::intern_context() {
  const TraceContext& c = t_context;
  // Linear search from the back: a run has a handful of distinct contexts and the latest one is
  // by far the most likely match.
  for (size_t i = contexts_.size(); i-- > 0;) {
    const TraceContextRecord& r = contexts_[i];
    if (r.phase == c.phase && r.op == c.op && r.label == c.label) return static_cast<uint32_t>(i);
  }
  contexts_.push_back({c.phase, c.op, c.label});
  return static_cast<uint32_t>(contexts_.size() - 1);
}

void TraceRecorder::record(TraceAction action, uint64_t address, uint64_t nbytes,
                           uint64_t requested, StreamId stream, int64_t allocated,
                           int64_t reserved) {
  std::lock_guard<std::mutex> lock(mutex_);
  TraceEvent e;
  e.action = action;
  e.stream = stream;
  e.time_ns = now_ns() - start_ns_;
  e.address = address;
  e.nbytes = nbytes;
  e.requested = requested;
  e.allocated = allocated;
  e.reserved = reserved;
  e.context = intern_context();
  if (events_.size() < max_entries_) {
    events_.push_back(e);
  } else {
    events_[next_] = e;
    next_ = (next_ + 1) % max_entries_;
    overflowed_ = true;
  }
}

std::vector<TraceEvent> TraceRecorder::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<TraceEvent> out;
  out.reserve(events_.size());
  // Once the ring has wrapped, the oldest event sits at next_.
  out.insert(out.end(), events_.begin() + static_cast<std::ptrdiff_t>(next_), events_.end());
  out.insert(out.end(), events_.begin(), events_.begin() + static_cast<std::ptrdiff_t>(next_));
  return out;
}

std::vector<TraceContextRecord> TraceRecorder::contexts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return contexts_;
}

std::string TraceRecorder::to_json(std::string_view device, std::string_view policy,
                                   size_t capacity) const {
  return trace_to_json(events(), contexts(), device, policy, capacity);
}

std::string trace_to_json(const std::vector<TraceEvent>& evs,
                          const std::vector<TraceContextRecord>& ctxs, std::string_view device,
                          std::string_view policy, size_t capacity) {
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
    fmt::format_to(to(), "{}{{\"label\":{},\"op\":{},\"phase\":{}}}", i == 0 ? "" : ",",
                   json_string(ctxs[i].label), ops[i], phases[i]);
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
                     ops[e.context], phases[e.context], e.nbytes, trace_action_name(e.action),
                     ts);
    }
  }
  if (!evs.empty()) add_phase_slices(out, evs, ctxs, phases);
  fmt::format_to(to(), "]}}");
  return out;
}

}  // namespace memgrad
