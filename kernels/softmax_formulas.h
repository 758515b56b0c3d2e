// softmax / log_softmax per-element formulas, written once for both backends: the CPU's strided
// path (kernels/cpu/softmax.cpp) and every CUDA path (kernels/cuda/softmax.cu). The CPU's row and
// column paths compute the same formulas as Eigen array expressions, vectorised, and round like
// these except that Eigen's exp is its own. A row's statistics (its max, the sum of exp(x - max))
// are computed by each backend in its own order. Nothing here allocates.
#pragma once

#include "kernels/scalar_math.h"

namespace memgrad::kernels {

// y of one element: log_softmax x - shift, with shift = max + log(sum); softmax
// exp(x - max) inv, with inv = 1 / sum (sum = the row's sum of exp(x - max)).
template <typename C>
MEMGRAD_HOST_DEVICE inline C softmax_value(bool log, C x, C max, C shift, C inv) {
  return log ? x - shift : std::exp(x - max) * inv;
}

// One element's term of the backward's row sum: g for log_softmax, g y for softmax.
template <typename C>
MEMGRAD_HOST_DEVICE inline C softmax_grad_term(bool log, C g, C y) {
  return log ? g : g * y;
}

// grad_in of one element from grad_out g, the forward's output y and the row sum of
// softmax_grad_term: log_softmax g - exp(y) sum, softmax y (g - sum).
template <typename C>
MEMGRAD_HOST_DEVICE inline C softmax_grad_value(bool log, C g, C y, C sum) {
  return log ? g - std::exp(y) * sum : y * (g - sum);
}

}  // namespace memgrad::kernels
