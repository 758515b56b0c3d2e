// Snapshots read back: a memory snapshot file (PyTorch's or memgrad's, pickle or JSON) as one
// device's request stream the lab can replay, with the recorded segment decisions kept apart to
// validate a replay against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/config.h"
#include "allocator/policy_allocator.h"
#include "allocator/trace.h"
#include "interop/py_value.h"

namespace memgrad {

// Reads a snapshot file, pickle or JSON (told apart by the first byte). Throws IoError when it
// cannot be read, PickleError or TraceError (naming the path) when it is malformed.
PyValue read_snapshot_file(const std::string& path);

// Whether the first bytes of a file look like a snapshot (a pickle, or JSON with PyTorch's keys)
// rather than memgrad's own trace JSON (whose "contexts" comes second).
bool is_snapshot_bytes(std::string_view bytes);

// A snapshot read back as one device's request stream.
// The state a recorded history starts from: its segments in address order (blocks tiling each,
// allocated or free) and, for each allocated block in that order, the index in
// ImportedSnapshot::events of the allocation "before history" it stands for.
struct StartState {
  std::vector<SeedSegment> segments;
  std::vector<uint64_t> addresses;  // each segment's recorded address
  std::vector<size_t> alloc_events;
};

struct ImportedSnapshot {
  int device = 0;           // the device index whose trace it is
  std::string device_name;  // memgrad's name when memgrad wrote it, else "cuda:N"
  size_t capacity = 0;      // the device's bytes when known (memgrad), else 0
  // Requests for plan_replay(): Alloc (requested bytes), FreeRequested at each free_completed,
  // and the recorded segment events; blocks live before the history began come first, as
  // allocs at time zero. EmptyCache marks where a burst of segment frees shows an empty_cache().
  // Each oom is followed by an Alloc of its size: the request that failed.
  std::vector<TraceEvent> events;
  std::vector<TraceContextRecord> contexts;
  std::vector<TraceEvent> recorded_segments;  // segment_alloc/free/map/unmap, in order
  bool recorded_oom = false;                  // whether the trace holds an oom event
  size_t segments_before_oom = 0;             // recorded segment events before the first oom
  size_t recorded_peak_reserved = 0;          // peak of the reserved bytes the segment events imply
  size_t live_before_history = 0;             // blocks allocated before the trace begins
  size_t frees_before_history = 0;            // frees of such blocks within the trace
  size_t failed_requests = 0;                 // oom events, replayed as allocations never freed
  size_t snapshot_markers = 0;                // snapshot entries (no requests: skipped)
  size_t history_events = 0;   // the device's trace entries that are events (0: no history)
  size_t segments_at_end = 0;  // the device's segments in `segments`
  size_t reserved_at_end = 0;  // and their bytes
  // The segments and blocks at the start of the history (the final ones walked back through it),
  // which a replay recreates before its first request; nullopt when that cannot be exact, with
  // the reason in start_note.
  std::optional<StartState> start;
  std::string start_note;
  AllocatorConfig config;  // the caching policy with the snapshot's settings
  // What the replay cannot model, one line each with the choice made (several streams,
  // private pools, an overflowed ring buffer, settings memgrad lacks, several devices).
  std::vector<std::string> notes;
};

// The requests of device `device` (default: the device with the most events). Throws TraceError
// naming the field and its place (e.g. "device_traces[0][17]: \"size\" is -1, expected an int
// in [0, 2^62]") for a snapshot that is not one, wrong types, negative or oversized sizes and
// addresses, unknown actions, more than 2^24 distinct streams in a trace, and blocks that do
// not tile their segment. A free of a block the trace never allocated is no error (the ring
// buffer makes it legitimate): such blocks are allocated at time zero and counted in
// frees_before_history. Allocates: host memory only: the result, and while reading a 32-byte
// record per trace entry.
ImportedSnapshot import_snapshot(const PyValue& snapshot, std::optional<int> device = {});

// import_snapshot(read_pickle(bytes), device), with the same result and the same errors, in a
// fraction of the memory: the pickle is read with its trace streamed (read_pickle with a sink),
// each entry of device_traces kept as a 32-byte record from the moment it is read rather than
// as a dict, and `bytes` (taken, hence by value) released before the requests are built.
// Allocates: at its peak about 1.8 times the pickle's size for memgrad's snapshots (the bytes
// and the records while reading; then the records and the requests, 72 bytes each), where the
// whole tree takes 14 times (lab/bench/lab_scale_bench.cpp measures it). A pickle laid out unlike
// Python's and libtorch's (found only at its end) is read again whole.
ImportedSnapshot import_snapshot_pickle(std::string bytes, std::optional<int> device = {});

// The requests of the snapshot file at `path`, pickle or JSON: import_snapshot(
// read_snapshot_file(path), device), with the same result and the same errors; a pickle goes
// through import_snapshot_pickle (the file is read once, into one buffer of its size).
ImportedSnapshot import_snapshot_file(const std::string& path, std::optional<int> device = {});

// The first difference between the segment decisions a replay made and the recorded ones
// (action and size, in order; within a run of consecutive segment frees or unmaps, whose order
// follows addresses, in order of action and size), or nullopt when they are the same. `context`
// gets the events around the divergence, one line each.
struct SegmentDivergence {
  size_t index = 0;      // position in the segment event sequences
  std::string expected;  // "segment_alloc 2097152", or "(none)" past the end
  std::string got;
  std::vector<std::string> context;  // the recorded and replayed events around `index`
};
std::optional<SegmentDivergence> compare_segments(const std::vector<TraceEvent>& recorded,
                                                  const std::vector<TraceEvent>& replayed);

}  // namespace memgrad
