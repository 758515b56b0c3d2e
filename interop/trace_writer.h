// memgrad's trace file: a recorder's events as JSON that Perfetto and chrome://tracing open
// directly and that interop/trace_reader.h reads back for the policy lab.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/trace.h"

namespace memgrad {

// The JSON of `events` and the `contexts` they index (recorded, replayed or re-read):
// "memgrad_events" and "contexts" as given, "memgrad_names" (what the recording program said
// blocks are: TraceName), and Chrome trace "traceEvents" (allocated and reserved counters, OOM
// and segment markers, phase slices) that Perfetto opens.
std::string trace_to_json(const std::vector<TraceEvent>& events,
                          const std::vector<TraceContextRecord>& contexts, std::string_view device,
                          std::string_view policy, size_t capacity,
                          const std::vector<TraceName>& names = {});

// trace_to_json of what `trace` holds now, with `device`, `policy` and `capacity` (bytes) in the
// header. Allocates: host memory for the copy of the events and the text.
std::string trace_to_json(const TraceRecorder& trace, std::string_view device,
                          std::string_view policy, size_t capacity);

}  // namespace memgrad
