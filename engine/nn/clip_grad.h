// Gradient clipping, as torch.nn.utils.clip_grad_norm_ and clip_grad_value_ (their per-tensor
// path, foreach=False): each parameter's .grad changed in place, outside grad mode. Parameters
// without a gradient are skipped.
#pragma once

#include <vector>

#include "engine/tensor.h"

namespace memgrad::nn {

// The p-norm of all the gradients together (each gradient's norm, then the norm of those; p =
// INFINITY: the largest |element|), then every gradient multiplied by min(1, max_norm / (total +
// 1e-6)). Returns the total norm (0-d, the first gradient's dtype; 0 with no gradient).
// Allocates: one 0-d norm per gradient (512 B each, rounded), their stack (N elements, freed
// once the total is made), the total, total + 1e-6, the coefficient and its clamped copy (512 B
// each, at most three at once); all freed on return but the total. Throws ValueError for max_norm <
// 0 or norm_type <= 0, and, with error_if_nonfinite, for a total that is inf or NaN (on a meta
// device the total is assumed finite).
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0, bool error_if_nonfinite = false);

// Every gradient element clamped to [-clip_value, clip_value], in place. Allocates: nothing.
// Throws ValueError for clip_value < 0.
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace memgrad::nn
