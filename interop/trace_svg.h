// An allocator trace drawn as a self-contained SVG timeline (`./memgrad lab plot`, B20).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/trace.h"

namespace memgrad {

// A self-contained SVG timeline of `events` (as TraceRecorder::events() returns them, with the
// contexts they index): allocated and reserved bytes over time as two step lines, each run of
// events in one phase as a shaded, labelled background band, byte and time axes, the peak
// marked, and a legend listing the largest blocks alive at the peak of allocated bytes with the
// op, phase and label that allocated them (blocks allocated before the trace started, or lost
// when the ring wrapped, are not known). `capacity` (bytes, 0: unknown) is drawn as a line when
// it is on the scale of the trace. Times are relative to the first event. Allocates host memory
// only (the returned string).
std::string trace_to_svg(const std::vector<TraceEvent>& events,
                         const std::vector<TraceContextRecord>& contexts, std::string_view title,
                         size_t capacity);

}  // namespace memgrad
