// TraceRecorder: a mutex-guarded ring of events and interned contexts.
#include "allocator/trace.h"

#include <chrono>
#include <map>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

namespace memgrad {
namespace {

thread_local TraceContext t_context;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
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

TraceModuleScope::TraceModuleScope(const char* module) : previous_(t_context.module) {
  t_context.module = module;
}

TraceModuleScope::~TraceModuleScope() { t_context.module = previous_; }

const char* intern_trace_string(std::string_view text) {
  static std::mutex* mutex = new std::mutex();  // immortal, as the strings
  static auto* strings = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(*mutex);
  return strings->emplace(text).first->c_str();
}

TraceLabelScope::TraceLabelScope(std::string label) : previous_(std::move(t_context.label)) {
  t_context.label = std::move(label);
}
TraceLabelScope::~TraceLabelScope() { t_context.label = std::move(previous_); }

TraceRecorder::TraceRecorder() = default;

void TraceRecorder::enable(size_t max_entries) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.clear();
  contexts_.clear();
  context_index_.clear();
  names_.clear();
  recorded_ = 0;
  last_context_ = 0;
  next_ = 0;
  overflowed_ = false;
  max_entries_ = max_entries == 0 ? 1 : max_entries;
  start_ns_ = now_ns();
  start_epoch_us_ = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  enabled_.store(true, std::memory_order_relaxed);
}

int64_t TraceRecorder::start_epoch_us() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return start_epoch_us_;
}

void TraceRecorder::disable() { enabled_.store(false, std::memory_order_relaxed); }

void TraceRecorder::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.clear();
  contexts_.clear();
  context_index_.clear();
  names_.clear();
  recorded_ = 0;
  last_context_ = 0;
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
  // The latest context is by far the most likely match; the others are looked up by their text
  // (a transformer's contexts run into the thousands: its modules times its ops).
  if (!contexts_.empty()) {
    const TraceContextRecord& last = contexts_[last_context_];
    if (last.phase == c.phase && last.op == c.op && last.module == c.module &&
        last.label == c.label) {
      return last_context_;
    }
  }
  std::string key =
      fmt::format("{}{}{}{}{}{}{}", c.phase, '\0', c.op, '\0', c.module, '\0', c.label);
  const auto [it, added] =
      context_index_.emplace(std::move(key), static_cast<uint32_t>(contexts_.size()));
  if (added) contexts_.push_back({c.phase, c.op, c.label, c.module});
  last_context_ = it->second;
  return it->second;
}

void TraceRecorder::name(uint64_t address, std::string_view module, std::string_view role) {
  std::lock_guard<std::mutex> lock(mutex_);
  names_.push_back({recorded_, address, std::string(module), std::string(role)});
}

std::vector<TraceName> TraceRecorder::names() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t dropped = recorded_ - events_.size();
  std::vector<TraceName> out;
  for (const TraceName& n : names_) {
    if (n.event < dropped) continue;
    out.push_back(n);
    out.back().event -= dropped;
  }
  return out;
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
  ++recorded_;
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

}  // namespace memgrad
