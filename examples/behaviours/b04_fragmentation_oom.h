// B4: an out-of-memory error while memory seems free (fragmentation and cached memory), and
// three ways out. The measurement, for the program and its test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "allocator/error.h"

namespace memgrad::examples {

// One run of the sequence x1 = 60 MiB; free x1; y = 20 MiB; z = 50 MiB on a fresh 100 MiB
// simulated device (all sizes times --size), with one allocator setting.
struct FragmentationRun {
  std::string name;  // "caching (default)", "max_split_size_mb:40", ...
  bool expected_oom = false;
  bool oom = false;                // whether z raised OutOfMemoryError
  int64_t expected_allocated = 0;  // bytes after the sequence, from the allocator's rules
  int64_t allocated = 0;
  int64_t expected_reserved = 0;
  int64_t reserved = 0;
  int64_t alloc_retries = 0;        // num_alloc_retries
  int64_t ooms = 0;                 // num_ooms
  std::string oom_message;          // the error's text when oom
  OutOfMemoryInfo oom_info;         // the error's fields when oom
  std::vector<std::string> layout;  // one line per segment: offset, size, blocks
};

struct FragmentationResult {
  int64_t capacity = 0;                // bytes of the simulated device
  std::vector<FragmentationRun> runs;  // default, max_split_size, empty_cache, (expandable)
  bool expandable_known = false;       // whether known_policies() lists "expandable"
};

// Runs the sequence on sim:`sim_index` once per setting: the default caching policy (z fails),
// max_split_size_mb:40, empty_cache() before y, and the expandable policy when this build has
// it. The device is re-created before each run; its capacity and allocator are restored after.
// With `snapshot_path`, the default run records its allocator's history and writes its memory
// snapshot (PyTorch's format: pickle, or JSON for ".json") at the moment z fails.
FragmentationResult measure_fragmentation(int64_t size, int sim_index,
                                          const std::string& snapshot_path = "");

}  // namespace memgrad::examples
