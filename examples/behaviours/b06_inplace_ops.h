// B6: in-place ops avoid copies but can break autograd. The measurement, for the program and its
// test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

struct InplaceResult {
  // x: float32 (256 size) x 1024, no grad.
  int64_t x_nbytes = 0;          // x's rounded block bytes
  int64_t add_out_of_place = 0;  // bytes allocated by x.add(1)
  int64_t add_in_place = 0;      // bytes allocated by x.add_(1)
  uint32_t version_before = 0;   // x.version() before and after x.add_(1)
  uint32_t version_after = 0;
  bool same_data = false;  // x.add_(1) wrote into x's own block

  // w: a float32 (2 size) x 3 leaf that requires grad.
  bool saved_error_raised = false;  // b = w.sigmoid(); b.mul_(2); b.sum().backward()
  std::string saved_error;
  bool leaf_error_raised = false;  // w.add_(1)
  std::string leaf_error;
  int64_t leaf_no_grad_add = 0;  // bytes allocated by w.add_(1) under NoGradGuard (allowed)
  int64_t non_leaf_add = 0;      // bytes allocated by h.add_(1), h = w * 2 (recorded)
  std::string non_leaf_grad_fn;  // h's grad_fn after add_
  std::vector<double> grad;      // w.grad after h.sum().backward()
};

// Runs the in-place cases on `device`. Needs autograd linked (requires_grad_, backward).
InplaceResult measure_inplace_ops(int64_t size, Device device);

}  // namespace memgrad::examples
