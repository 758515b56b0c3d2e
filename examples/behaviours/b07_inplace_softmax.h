// B7: in-place softmax and its (limited) effect on peak memory. The measurement, for the program
// and its test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

// One way of computing softmax(x, dim 1) of a float32 (rows, cols) tensor x.
struct SoftmaxCase {
  std::string name;            // "out of place, no autograd", ...
  bool autograd = false;       // x = w * 1.0 for a leaf w that requires grad
  int64_t expected_peak = 0;   // bytes above the start, from the shapes and what autograd saves
  int64_t peak = 0;            // max_memory_allocated() after a reset, minus the start
  int64_t expected_held = 0;   // bytes still held after the computation (result + saved)
  int64_t held = 0;            // memory_allocated() after, minus the start
  double max_error = 0.0;      // largest |result - softmax(x, 1)| (the sequence is correct)
  bool backward_ran = false;   // with autograd: whether backward completed
  std::string backward_error;  // ... or the error it raised
};

struct SoftmaxResult {
  int64_t rows = 0, cols = 0;
  int64_t output_bytes = 0;        // rounded rows x cols x 4: the N-float output
  int64_t row_bytes = 0;           // rounded rows x 4: a (rows, 1) temporary
  std::vector<SoftmaxCase> cases;  // out of place / in place, without / with autograd
};

// Measures the four cases on a (256 size) x 1024 tensor on `device`. The in-place sequence is
// the article's: x.sub_(x.amax({1}, true)); x.exp_(); x.div_(x.sum({1}, true)).
SoftmaxResult measure_inplace_softmax(int64_t size, Device device);

}  // namespace memgrad::examples
