// Writing PyTorch's memory snapshot from a memgrad allocator, and writing it to a file.
#include "interop/memory_snapshot.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "interop/allocator_settings.h"
#include "interop/pickle_writer.h"

namespace memgrad {
namespace {

using Entries = PyValue::Entries;
using Items = PyValue::Items;

// "phase: forward, op: matmul, label: layer 3" (empty parts left out).
std::string metadata_of(const TraceContextRecord& c) {
  std::string out;
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"phase", &c.phase},
                                   {"op", &c.op},
                                   {"label", &c.label}}) {
    if (value->empty()) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("{}: {}", key, *value);
  }
  return out;
}

// The frames of one context, innermost first as PyTorch's stack: the op, the module, the phase
// and the label, each a frame whose "filename" says which it is (PyTorch's viewer shows a frame
// as filename:line:name, so "op:0:matmul", "module:0:blocks.3.attn", "phase:0:forward"); memgrad
// records no source lines. A context with none of them is one frame, "memgrad:0:(no context)".
// Frames are shared values, so each distinct context is one object in the pickle (its memo).
PyValue frames_of(const TraceContextRecord& c) {
  Items frames;
  for (const auto& [kind, value] : {std::pair<const char*, const std::string*>{"op", &c.op},
                                    {"module", &c.module},
                                    {"phase", &c.phase},
                                    {"label", &c.label}}) {
    if (!value->empty()) {
      frames.push_back(PyValue::dict({{"filename", kind}, {"line", 0}, {"name", *value}}));
    }
  }
  if (frames.empty()) {
    frames.push_back(
        PyValue::dict({{"filename", "memgrad"}, {"line", 0}, {"name", "(no context)"}}));
  }
  return PyValue::list(std::move(frames));
}

const char* state_of(const BlockSnapshot& b) {
  if (b.pending_free) return "active_pending_free";
  return b.allocated ? "active_allocated" : "inactive";
}

// The trace as PyTorch's TraceEntry dicts, time_us in microseconds since the Unix epoch. Alloc
// and free events carry the requested bytes; a free that does not record them (the pinned
// policy's free_completed) takes its alloc's.
Items trace_entries(const std::vector<TraceEvent>& events, const std::vector<PyValue>& frames,
                    const std::vector<PyValue>& metadata, int64_t start_epoch_us) {
  Items out;
  out.reserve(events.size());
  std::unordered_map<uint64_t, uint64_t> requested_at;  // live allocs: address -> bytes
  for (const TraceEvent& e : events) {
    if (e.action == TraceAction::EmptyCache) continue;  // PyTorch has no such entry
    const PyValue& f = frames[e.context];
    const PyValue& m = metadata[e.context];
    const PyValue stream = static_cast<int64_t>(e.stream);
    const PyValue time_us = start_epoch_us + e.time_ns / 1000;  // since the epoch, as PyTorch
    const std::string action(trace_action_name(e.action));
    if (e.action == TraceAction::Snapshot) {
      // As PyTorch writes it: address 0, the active bytes, no frames (it records none).
      out.push_back(PyValue::dict({{"action", action},
                                   {"addr", 0},
                                   {"size", e.nbytes},
                                   {"stream", stream},
                                   {"time_us", time_us},
                                   {"compile_context", ""},
                                   {"user_metadata", ""}}));
      continue;
    }
    if (e.action == TraceAction::Oom) {
      out.push_back(PyValue::dict({{"action", action},
                                   {"device_free", e.address},
                                   {"size", e.nbytes},
                                   {"stream", stream},
                                   {"time_us", time_us},
                                   {"compile_context", ""},
                                   {"user_metadata", m},
                                   {"frames", f}}));
      continue;
    }
    uint64_t size = e.nbytes;
    if (e.action == TraceAction::Alloc) {
      size = e.requested;
      requested_at[e.address] = e.requested;
    } else if (e.action == TraceAction::FreeRequested || e.action == TraceAction::FreeCompleted) {
      const auto it = requested_at.find(e.address);
      size = e.requested != 0 || it == requested_at.end() ? e.requested : it->second;
      if (e.action == TraceAction::FreeCompleted && it != requested_at.end()) {
        requested_at.erase(it);
      }
    }
    out.push_back(PyValue::dict({{"action", action},
                                 {"addr", e.address},
                                 {"size", size},
                                 {"stream", stream},
                                 {"time_us", time_us},
                                 {"compile_context", ""},
                                 {"user_metadata", m},
                                 {"frames", f}}));
  }
  return out;
}

// The frames of the alloc event of each block still live at the end of the trace.
std::unordered_map<uint64_t, uint32_t> live_contexts(const std::vector<TraceEvent>& events) {
  std::unordered_map<uint64_t, uint32_t> live;
  for (const TraceEvent& e : events) {
    if (e.action == TraceAction::Alloc) live[e.address] = e.context;
    if (e.action == TraceAction::FreeCompleted) live.erase(e.address);
  }
  return live;
}

PyValue segment_value(const SegmentSnapshot& s, int device,
                      const std::unordered_map<uint64_t, uint32_t>& live,
                      const std::vector<PyValue>& frames) {
  Items blocks;
  uint64_t allocated = 0, active = 0, requested = 0;
  for (const BlockSnapshot& b : s.blocks) {
    if (b.nbytes == 0) continue;
    Entries block = {{"address", b.address},
                     {"size", b.nbytes},
                     {"requested_size", b.allocated || b.pending_free ? b.requested : 0},
                     {"state", state_of(b)}};
    PyValue block_frames = PyValue::list();  // PyTorch writes [] for a free block too
    if (b.allocated || b.pending_free) {
      active += b.nbytes;
      requested += b.requested;
      if (b.allocated) allocated += b.nbytes;
      const auto it = live.find(b.address);
      if (it != live.end()) block_frames = frames[it->second];
    }
    block.emplace_back("frames", std::move(block_frames));
    blocks.push_back(PyValue::dict(std::move(block)));
  }
  return PyValue::dict({{"device", device},
                        {"address", s.address},
                        {"total_size", s.nbytes},
                        {"allocated_size", allocated},
                        {"active_size", active},
                        {"requested_size", requested},
                        {"stream", static_cast<int64_t>(s.stream)},
                        {"segment_type", s.small_pool ? "small" : "large"},
                        {"segment_pool_id", PyValue::tuple({0, 0})},
                        {"is_expandable", s.expandable},
                        {"frames", PyValue::list()},
                        {"blocks", PyValue::list(std::move(blocks))}});
}

}  // namespace

PyValue memory_snapshot(PolicyAllocator& allocator, const AllocatorConfig& config,
                        int device_index) {
  // The segments first, then the snapshot entry, then the trace that ends with it: the order of
  // PyTorch's snapshot(), whose entry records the active bytes of the segments it returns.
  const std::vector<SegmentSnapshot> state = allocator.snapshot();
  uint64_t active = 0;
  for (const SegmentSnapshot& s : state) {
    for (const BlockSnapshot& b : s.blocks) {
      if (b.allocated || b.pending_free) active += b.nbytes;
    }
  }
  allocator.mark_in_trace(TraceAction::Snapshot, active);
  const TraceRecorder& trace = allocator.trace();
  const std::vector<TraceEvent> events = trace.events();
  const std::vector<TraceContextRecord> contexts = trace.contexts();
  std::vector<PyValue> frames, metadata;
  for (const TraceContextRecord& c : contexts) {
    frames.push_back(frames_of(c));
    metadata.push_back(metadata_of(c));
  }
  const auto live = live_contexts(events);
  Items segments;
  for (const SegmentSnapshot& s : state) {
    segments.push_back(segment_value(s, device_index, live, frames));
  }
  Items traces(static_cast<size_t>(device_index), PyValue::list());
  traces.push_back(PyValue::list(trace_entries(events, frames, metadata, trace.start_epoch_us())));
  Entries settings = allocator_settings_of(config).entries();
  settings.emplace_back("trace_alloc_max_entries", trace.max_entries() == SIZE_MAX
                                                       ? int64_t{-1}
                                                       : static_cast<int64_t>(trace.max_entries()));
  settings.emplace_back("trace_alloc_overflowed", trace.overflowed());
  const MemorySource& source = allocator.source();
  return PyValue::dict({
      {"segments", PyValue::list(std::move(segments))},
      {"device_traces", PyValue::list(std::move(traces))},
      {"allocator_settings", PyValue::dict(std::move(settings))},
      {"memgrad", PyValue::dict({{"device", source.name()},
                                 {"policy", std::string(allocator.policy_name())},
                                 {"capacity", source.capacity()}})},
  });
}

void write_snapshot_file(const std::string& path, const PyValue& snapshot) {
  const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  write_file_atomically(path, json ? snapshot.to_json().dump() : write_pickle(snapshot, 2));
}

}  // namespace memgrad
