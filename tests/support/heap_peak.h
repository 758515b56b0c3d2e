// Test helper: the most heap bytes live at once while a block of code runs.
//
//   HeapPeak peak;
//   ... act ...
//   CHECK(peak.bytes() <= 2 * input.size());   // above what was live when `peak` was made
//
// Counts what goes through the global operator new (tests/support/heap_peak.cpp replaces it in
// the executables that link that file), at malloc's usable size of each block, from any thread.
// Memory from malloc called directly, and the pages a block occupies beyond its usable size,
// are not counted.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memgrad::testing {

// Bytes live through operator new now, and the most since the last reset_heap_peak().
int64_t heap_live_bytes();
int64_t heap_peak_bytes();
void reset_heap_peak();

class HeapPeak {
 public:
  HeapPeak() : start_(heap_live_bytes()) { reset_heap_peak(); }
  // The most bytes live at once since construction, above those live at construction.
  int64_t bytes() const { return heap_peak_bytes() - start_; }

 private:
  int64_t start_;
};

}  // namespace memgrad::testing
