// The "expected vs measured" printer every example uses.
//
// An example computes what it expects from shapes and the allocator's rounding first, then
// measures, then adds one row per claim. The table shows both numbers in bytes (and a human
// unit) and whether they match; the example's exit status says whether every row matched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memgrad::examples {

// "2.00 MiB" style (binary units), exact bytes below 1 KiB.
std::string human_bytes(int64_t nbytes);

// Bytes the caching allocator sets aside for a request of nbytes (512-byte multiples; 0 for 0).
int64_t rounded(int64_t nbytes);

class MemoryReport {
 public:
  explicit MemoryReport(std::string title);

  // One claim. `tolerance` in bytes (0: must be exact).
  void add(std::string what, int64_t expected, int64_t measured, int64_t tolerance = 0);
  // A row with a measured value only (no expectation), e.g. a peak shown for context.
  void note(std::string what, int64_t measured);

  // The table, e.g.
  //   phase                     expected        measured   match
  //   after model init       2,679,296 B     2,679,296 B   yes   (2.56 MiB)
  std::string str() const;
  void print() const;
  bool all_match() const;

 private:
  struct Row {
    std::string what;
    int64_t expected;
    int64_t measured;
    int64_t tolerance;
    bool has_expectation;
  };
  std::string title_;
  std::vector<Row> rows_;
};

// "1,234,567".
std::string with_commas(int64_t n);

}  // namespace memgrad::examples
