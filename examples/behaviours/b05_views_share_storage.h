// B5: views share storage; clone copies. The measurement, for the program and its test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

struct ViewRow {
  std::string op;        // "x.view({n, 64})", "x.t().contiguous()", ...
  int64_t expected = 0;  // bytes the op should allocate
  int64_t measured = 0;  // allocated bytes after minus before
  bool shares_storage = false;
  int64_t data_offset = 0;  // result.data_ptr() - x.data_ptr(), in bytes
};

// Applies each view, copy and contiguous() op to a float32 tensor x of (64 size) x 64 on
// `device`, measuring what each allocates.
std::vector<ViewRow> measure_views(int64_t size, Device device);

}  // namespace memgrad::examples
