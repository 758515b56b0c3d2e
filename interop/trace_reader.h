// Reading memgrad's trace JSON back (what TraceRecorder's events become in
// interop/trace_writer.h): its header, events and contexts, every field checked.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/trace.h"

namespace memgrad {

// A trace file as read back: its header, events and contexts.
struct RecordedTrace {
  std::string device;
  std::string policy;
  size_t capacity = 0;  // bytes (0: not recorded)
  std::vector<TraceEvent> events;
  std::vector<TraceContextRecord> contexts;
};

// Parses the JSON of TraceRecorder::to_json. Throws TraceError naming the event, the field and
// its value: a negative or non-integer number, a request above 1 EiB, a time or byte count above
// 2^62, times that go backwards, an unknown action or context.
RecordedTrace parse_trace(std::string_view json);
// Reads and parses a trace file. Throws IoError when it cannot be read, TraceError naming the
// path when it is malformed.
RecordedTrace read_trace_file(const std::string& path);

namespace detail {
// parse_trace's two readers, for the tests that compare them: the recorder's exact layout read
// directly (nullopt at the first difference, or for any value the JSON reader would refuse), and
// the JSON reader (nlohmann's SAX) that reads every other text and words every error.
std::optional<RecordedTrace> parse_canonical_trace(std::string_view json);
RecordedTrace parse_trace_general(std::string_view json);
}  // namespace detail

}  // namespace memgrad
