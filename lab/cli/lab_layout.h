// The policy lab's layout pictures: one fixed request sequence, and a snapshot drawn as SVG.
//
// Each policy serves the same short sequence (a few allocations of training-step sizes, some
// freed, a few more allocated), and its snapshot afterwards is drawn to scale: one row per
// 4 MiB of each segment, allocated blocks filled (the requested bytes dark, the rounding above
// them light), free blocks outlined. The pictures in docs/images/ are generated with
// `lab_replay layout`, never drawn by hand.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "allocator/policy_allocator.h"
#include "lab/memory_plan.h"

namespace memgrad::lab {

// Serves the fixed sequence with `allocator` and returns its snapshot (blocks still live are
// freed afterwards). Throws OutOfMemoryError when the source is too small (64 MiB is enough).
std::vector<SegmentSnapshot> run_layout_sequence(PolicyAllocator& allocator);

// The sequence as one recorded step (ids: the step's index), for the planned policy's plan of it.
RecordedStep layout_sequence_step();

// The sequence in words, as the docs describe it.
std::string layout_sequence_text();

// A self-contained SVG of `segments` (addresses relative to the device base) with `title` and a
// line of totals. Allocates host memory only.
std::string snapshot_to_svg(const std::vector<SegmentSnapshot>& segments, std::string_view title);

}  // namespace memgrad::lab
