// Allocator trace recording: every alloc, free, segment map/unmap and OOM, with its context.
//
// Off by default and cheap when off (one relaxed atomic load per allocator call). When on, each
// event stores its time, address, sizes, stream, the allocated/reserved totals right after it,
// and the context it happened in: the phase (forward, backward, optimizer, ...), the op, and a
// free-form user label, all set by scoped guards on the calling thread. interop/trace_writer.h
// writes the events as JSON that Perfetto / chrome://tracing open directly and the policy lab
// replays against other policies; interop/trace_svg.h draws them as an SVG timeline.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "allocator/stream.h"

namespace memgrad {

// PyTorch's TraceEntry actions.
enum class TraceAction : uint8_t {
  Alloc,          // a block handed out
  FreeRequested,  // the caller freed a block (it may still wait on other streams)
  FreeCompleted,  // the block went back to the pool
  SegmentAlloc,   // a segment obtained from the source
  SegmentFree,    // a segment returned to the source
  SegmentMap,     // pages mapped into an expandable segment
  SegmentUnmap,   // pages unmapped from an expandable segment
  Oom,            // an OutOfMemoryError was thrown
  EmptyCache,     // the program called empty_cache() (memgrad's own; PyTorch records none)
  Snapshot,       // a memory snapshot was taken (nbytes: the active bytes of its segments)
};

// The action's name as PyTorch's snapshots spell it ("alloc", "segment_free", ...).
std::string_view trace_action_name(TraceAction action);

// The calling thread's context, copied into each event. `phase` and `op` point at string
// literals (set by the engine and autograd); `module` at an interned module path ("blocks.3.attn",
// set while a module runs its forward and while autograd runs the nodes it recorded); `label` is
// the user's.
struct TraceContext {
  const char* phase = "";
  const char* op = "";
  const char* module = "";
  std::string label;
};

// A pointer to a copy of `text` that lives as long as the process (the same pointer for the same
// text), for the module paths the trace contexts point at. Allocates: host memory, once per text.
const char* intern_trace_string(std::string_view text);

// The calling thread's current context.
const TraceContext& current_trace_context();

// Sets the phase ("forward", "backward", "optimizer", ...) for the current scope. `phase` must be
// a string with static storage duration.
class TracePhaseScope {
 public:
  explicit TracePhaseScope(const char* phase);
  ~TracePhaseScope();
  TracePhaseScope(const TracePhaseScope&) = delete;
  TracePhaseScope& operator=(const TracePhaseScope&) = delete;

 private:
  const char* previous_;
};

// Sets the op name for the current scope. `op` must have static storage duration.
class TraceOpScope {
 public:
  explicit TraceOpScope(const char* op);
  ~TraceOpScope();
  TraceOpScope(const TraceOpScope&) = delete;
  TraceOpScope& operator=(const TraceOpScope&) = delete;

 private:
  const char* previous_;
};

// Sets the module path for the current scope. `module` must live as long as the process
// (intern_trace_string).
class TraceModuleScope {
 public:
  explicit TraceModuleScope(const char* module);
  ~TraceModuleScope();
  TraceModuleScope(const TraceModuleScope&) = delete;
  TraceModuleScope& operator=(const TraceModuleScope&) = delete;

 private:
  const char* previous_;
};

// Sets a free-form user label for the current scope ("layer 3", "eval", ...).
class TraceLabelScope {
 public:
  explicit TraceLabelScope(std::string label);
  ~TraceLabelScope();
  TraceLabelScope(const TraceLabelScope&) = delete;
  TraceLabelScope& operator=(const TraceLabelScope&) = delete;

 private:
  std::string previous_;
};

struct TraceEvent {
  TraceAction action = TraceAction::Alloc;
  StreamId stream = kDefaultStream;
  int64_t time_ns = 0;     // since the recorder was enabled
  uint64_t address = 0;    // device address; for Oom: the device's free bytes (as PyTorch)
  uint64_t nbytes = 0;     // block size (alloc/free), segment or page size, or rounded OOM request
  uint64_t requested = 0;  // the caller's size for Alloc / Free*; 0 otherwise
  int64_t allocated = 0;   // allocated bytes right after the event
  int64_t reserved = 0;    // reserved bytes right after the event
  uint32_t context = 0;    // index into TraceRecorder::contexts()
};

// The context of an event, as stored (interned) by the recorder.
struct TraceContextRecord {
  std::string phase;
  std::string op;
  std::string label;
  std::string module;
};

// What a block is, said by the code that knows (a module naming its parameters once it knows
// its path, a DDP gradient bucket): it applies to the block live at `address` after the first
// `event` events of the trace (those it holds, ring or not).
struct TraceName {
  uint64_t event = 0;
  uint64_t address = 0;
  std::string module;  // "blocks.3.attn.qkv"; "" for none
  std::string role;    // "parameter", "buffer", "gradient", "optimizer state"
};

class TraceRecorder {
 public:
  TraceRecorder();

  // Starts recording (clearing earlier events). Keeps at most `max_entries` events; older ones
  // are overwritten, as in PyTorch's ring buffer.
  void enable(size_t max_entries = SIZE_MAX);
  void disable();
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  void clear();
  // Whether the ring has overwritten events since enable() or clear() (PyTorch's
  // trace_alloc_overflowed), and the ring's size.
  bool overflowed() const;
  size_t max_entries() const;
  // The number of events held (at most max_entries()), without copying them.
  size_t size() const;
  // When recording started, in microseconds since the Unix epoch (the system clock): an event's
  // wall time is this plus its time_ns / 1000, as PyTorch's time_us.
  int64_t start_epoch_us() const;

  // Records one event with the calling thread's context. Call only when enabled().
  void record(TraceAction action, uint64_t address, uint64_t nbytes, uint64_t requested,
              StreamId stream, int64_t allocated, int64_t reserved);

  // Names the block live at `address` now (see TraceName). Call only when enabled().
  void name(uint64_t address, std::string_view module, std::string_view role);

  // The events in time order, and the contexts they index.
  std::vector<TraceEvent> events() const;
  std::vector<TraceContextRecord> contexts() const;
  // The names given, each counted against the events held (names of blocks whose events the
  // ring has overwritten are left out).
  std::vector<TraceName> names() const;

 private:
  uint32_t intern_context();  // requires mutex_

  std::atomic<bool> enabled_{false};
  mutable std::mutex mutex_;
  int64_t start_ns_ = 0;
  int64_t start_epoch_us_ = 0;
  size_t max_entries_ = SIZE_MAX;
  size_t next_ = 0;  // ring position once the buffer is full
  bool overflowed_ = false;
  uint32_t last_context_ = 0;  // the context of the latest event
  uint64_t recorded_ = 0;      // events recorded since enable() or clear(), the overwritten too
  std::vector<TraceEvent> events_;
  std::vector<TraceContextRecord> contexts_;
  // Where each context is in contexts_: phase, op, module and label joined by '\0'.
  std::unordered_map<std::string, uint32_t> context_index_;
  std::vector<TraceName> names_;  // event: counted in recorded_
};

}  // namespace memgrad
