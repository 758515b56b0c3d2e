// gradcheck: analytic gradients against central finite differences, in float64.
//
// For a function of some float64 tensors, the Jacobian computed by backward (one backward pass
// per output element) is compared with (f(x + eps) - f(x - eps)) / 2 eps for every input
// element. The report of a mismatch names the input, the element, the output element, both
// values and the largest difference, so a failing test says what is wrong.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace memgrad::autograd {

struct GradcheckResult {
  bool ok = true;
  std::string report;  // empty when ok
  double max_abs_diff = 0.0;
};

using TestFunction = std::function<Tensor(const std::vector<Tensor>&)>;

// `inputs` must be contiguous float64 leaves; those that require grad are checked. `fn` may
// return a tensor of any shape. Throws ValueError for unsuitable inputs.
GradcheckResult gradcheck(const TestFunction& fn, const std::vector<Tensor>& inputs,
                          const std::string& name = "function", double eps = 1e-6,
                          double atol = 1e-5, double rtol = 1e-3);

}  // namespace memgrad::autograd
