// The steady-state memory of a training run: what the device allocator holds once the steps
// repeat, under the policy the run uses, against the caching policy on the same requests.
//
// The run's requests are recorded (the device allocator's trace, from the start of the run) up
// to the end of the steady window: the training steps before the first evaluation. There the
// reserved bytes of the live policy are read, and, when that policy is not caching, the recorded
// requests are replayed with the caching policy on a simulated device (lab/trace_replay.h)
// for its reserved bytes at the same point. `--alloc-policy planned` thus shows its arena next
// to what caching would have kept for the same steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/device.h"

namespace memgrad::examples {

class SteadyStateReport {
 public:
  // Starts recording the requests of `device` (unless a trace is already on, e.g. MEMGRAD_TRACE,
  // which is then read, not cleared). Allocates: host memory for the trace, about 40 bytes per
  // request until finish().
  explicit SteadyStateReport(Device device);
  ~SteadyStateReport();
  SteadyStateReport(const SteadyStateReport&) = delete;
  SteadyStateReport& operator=(const SteadyStateReport&) = delete;

  // Ends the window after `steps` training steps: reads the reserved bytes, replays the recorded
  // requests with caching when the policy is another, stops recording. Later calls do nothing.
  // Allocates: a simulated device for the replay (address space; pages as caching maps them).
  void finish(int64_t steps);

  // "steady state after N steps: reserved X under P; caching on the same requests: Y" (nothing
  // before finish()).
  void print() const;

 private:
  Device device_;
  bool owns_trace_ = false;
  bool finished_ = false;
  int64_t steps_ = 0;
  std::string policy_;
  size_t reserved_ = 0;          // bytes: the live policy's, at the end of the window
  size_t allocated_ = 0;         // bytes: allocated at that point
  size_t caching_reserved_ = 0;  // bytes: caching's on the replayed requests (0: not replayed)
  std::string replay_note_;      // why there is no caching figure, when there is none
  std::string planned_note_;     // the planned policy: its arena and its fallbacks
};

}  // namespace memgrad::examples
