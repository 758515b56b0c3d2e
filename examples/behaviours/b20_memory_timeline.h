// B20: profiling memory over time. The measurement, for the program and its test.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

struct TimelineResult {
  std::string json;  // TraceRecorder::to_json: Chrome trace (Perfetto) plus the raw events
  std::string svg;   // trace_to_svg
  int64_t events = 0;
  // Event counts by phase (in order of first appearance; "" is no phase) and by action.
  std::vector<std::pair<std::string, int64_t>> per_phase;
  std::vector<std::pair<std::string, int64_t>> per_action;
  int64_t trace_peak = 0;           // the highest allocated value among the events
  std::string peak_phase, peak_op;  // the context of the first event that reached it
  int64_t stats_peak = 0;  // max_memory_allocated over the same step (peak reset before it)
  // The JSON read back: whether it parsed, how many allocated/reserved counter samples it has,
  // and the last allocated value on the counter track, next to memory_allocated() at that time.
  bool json_parses = false;
  int64_t counter_samples = 0;
  int64_t last_counter_allocated = -1;
  int64_t memory_allocated_at_end = 0;
};

// Records the allocator trace of one training step (data, forward, backward, optimizer,
// zero_grad) of a Linear(128, 256 size) -> ReLU -> Linear(256 size, 10) classifier with Adam on
// `device`, and renders it as JSON and SVG.
TimelineResult record_training_step(int64_t size, Device device);

}  // namespace memgrad::examples
