// The nn ops that layers and losses are built from (PyTorch's torch.nn.functional).
//
// Memory contracts:
//   layer_norm     Allocates: y, plus mean and rstd (one float32 per row, float64 for float64
//                  inputs); a contiguous copy of a non-contiguous input, and copies of weight
//                  and bias in x's dtype when they differ (under autocast).
//                  Saves: layer_norm: x, mean, rstd and the weight (PyTorch's native_layer_norm).
//   dropout        Allocates: y and a bool mask (1 byte per element) in training; nothing in
//                  eval (returns x). Saves: dropout: the mask.
//   cross_entropy  Fused log-softmax + NLL. Allocates: the log-probabilities (N x C), the
//                  per-row losses (N) and the loss; with reduction mean also, freed before it
//                  returns, the 0-d sum, a bool mask of N bytes and its int64 count. The
//                  losses (unless reduction is none) and, when nothing is recorded, the
//                  log-probabilities are freed on return.
//                  Saves: cross_entropy: the log-probabilities and the target.
//   mse_loss       Composed of sub, square, mean. Saves: the difference (square saves it).
#pragma once

#include <optional>

#include "engine/generator.h"
#include "engine/tensor.h"

namespace memgrad::nn {

enum class Reduction { None, Mean, Sum };

// Normalises over the last dims given by `normalized_shape`; weight/bias (that shape) optional.
// Throws ShapeError when x's trailing dims differ from normalized_shape.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

// Zeroes each element with probability p and scales the rest by 1/(1-p), when training.
// Throws ValueError for p outside [0, 1].
Tensor dropout(const Tensor& x, double p, bool training, Generator* generator = nullptr);

// logits (N, C) or (C), target int64 class indices (N) or (). Throws IndexError for a target
// outside [0, C) that is not ignore_index, ShapeError/DTypeError for bad shapes and dtypes.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, double label_smoothing = 0.0,
                     int64_t ignore_index = -100, Reduction reduction = Reduction::Mean);

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

}  // namespace memgrad::nn
