// B15: lazy parameter initialisation. The measurement, for the program and its test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

// One LazyLinear layer of the model, after its first forward.
struct LazyLayerRow {
  std::string name;       // "0: LazyLinear(256 -> 128)"
  int64_t expected = 0;   // rounded weight bytes + rounded bias bytes
  int64_t measured = 0;   // allocated bytes the layer's first forward kept (its output excluded)
  bool has_bias = false;  // "<i>.bias" is among the model's parameter names
};

struct LazyInitResult {
  int64_t in_features = 0, hidden = 0, classes = 0, batch = 0;
  // Before the first forward: allocated bytes the construction added, and the parameter list.
  int64_t construction_bytes = 0;
  size_t parameters_before = 0;
  // The first forward, layer by layer, and in total (output released).
  std::vector<LazyLayerRow> layers;
  int64_t expected_parameter_bytes = 0;
  int64_t first_forward_bytes = 0;           // allocated after - before, output released
  int64_t second_forward_bytes = 0;          // the same for the second forward: no new parameters
  std::vector<std::string> parameter_names;  // after the first forward
  // For comparison: an eager Linear of the first layer's shape allocates at construction, and a
  // LazyLinear without bias (what the article's layer really builds) holds the weight only.
  int64_t eager_construction_bytes = 0;
  int64_t eager_expected = 0;
  int64_t weight_only_bytes = 0;
  int64_t weight_only_expected = 0;
};

// Builds LazyLinear(hidden) -> ReLU -> LazyLinear(hidden) -> ReLU -> LazyLinear(10) on `device`
// (hidden = 128 size, inputs of 256 features) and measures it before, during and after its
// first forward (in no-grad mode, so only parameters and outputs are allocated).
LazyInitResult measure_lazy_init(int64_t size, Device device);

}  // namespace memgrad::examples
