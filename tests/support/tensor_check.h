// Test helpers for tensors: value comparison with a readable failure, and device lists.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/memgrad.h"

namespace memgrad::testing {

// Checks that `t` has `sizes` and values within `tol` of `expected` (row-major). On failure,
// names the first mismatching element and the largest difference.
inline void check_values(const Tensor& t, const Shape& sizes, const std::vector<double>& expected,
                         double tol = 1e-6) {
  CHECK_MESSAGE(t.sizes() == sizes,
                fmt::format("shape {} != expected {}", to_string(t.sizes()), to_string(sizes)));
  if (!(t.sizes() == sizes)) return;
  const std::vector<double> got = t.to_vector<double>();
  REQUIRE_EQ(got.size(), expected.size());
  double worst = 0.0;
  size_t first_bad = got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const bool both_nan = std::isnan(got[i]) && std::isnan(expected[i]);
    const double diff = both_nan ? 0.0 : std::abs(got[i] - expected[i]);
    if (!(diff <= tol) && first_bad == got.size()) first_bad = i;
    if (diff > worst || std::isnan(diff)) worst = diff;
  }
  CHECK_MESSAGE(first_bad == got.size(),
                fmt::format("element {}: got {}, expected {}; max |diff| {}; got {}", first_bad,
                            first_bad < got.size() ? got[first_bad] : 0.0,
                            first_bad < got.size() ? expected[first_bad] : 0.0, worst, got));
}

// Whether this executable tests cuda:0 too: the CUDA suite's main (tests/cuda/cuda_main.cpp)
// sets it, and links the engine suite's object files, compiled once for both.
inline bool& cuda_under_test() {
  static bool on = false;
  return on;
}

// The devices every engine test runs on: the CPU and a simulated bounded device, plus cuda:0
// in the CUDA suite when a device is present (chosen at run time).
inline std::vector<Device> devices_under_test() {
  std::vector<Device> devices = {Device("cpu"), Device("sim:0")};
  if (cuda_under_test() && cuda::is_available()) devices.push_back(Device("cuda:0"));
  return devices;
}

// Allocations ever made by `device`'s allocator (freed ones included): how many blocks an op
// asked for, whatever it kept.
inline int64_t allocations_made(Device device) {
  return allocator_for(device).stats().allocation.all().allocated;
}

// Bytes the allocator of `device` sets aside for a request of `nbytes` (the caching policy's
// rounding: multiples of 512, at least 512; 0 for 0).
inline int64_t rounded(size_t nbytes) {
  if (nbytes == 0) return 0;
  return static_cast<int64_t>((nbytes + 511) / 512 * 512);
}

}  // namespace memgrad::testing
