// Reductions over dimensions, and softmax / log_softmax.
//
// Memory contract for the family:
//   Allocates: the reduced result (the input's sizes with the reduced dims removed, or kept as 1
//              with keepdim); max/min along a dim also allocate an int64 indices tensor. No
//              full-size temporaries except where stated (var/std allocate nothing extra: they
//              make two passes). softmax/log_softmax allocate their result only. argmax/argmin
//              without a dim of a non-contiguous input flatten a temporary contiguous copy
//              (freed before returning), as PyTorch's reshape(-1) does.
//   Aliases:   nothing. Version: unchanged.
//   Saves for backward (when the input requires grad; PyTorch's formulas):
//     sum, mean: nothing
//     var: self
//     std: self and the result
//     max, min along a dim: the indices
//     max, min of all elements, amax, amin, logsumexp, norm: self and the result
//     softmax, log_softmax: the result
//     any, all, argmax, argmin: never recorded
// `dims` empty means every dimension. Integer and bool inputs sum to int64; mean, var, std,
// norm and softmax need floating inputs (DTypeError otherwise). Float16 inputs accumulate in
// float32 and store float16.
#pragma once

#include <optional>
#include <utility>

#include "engine/tensor.h"

namespace memgrad {

Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
// Divides by N - correction (1: the unbiased estimate, as torch.var's default).
Tensor var(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
// Full reductions to a 0-d tensor. Throws ShapeError on an empty tensor.
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
// (values, indices) along `dim`; the first index among equal values.
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
// int64 indices; without a dim, the index into the flattened tensor.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// log(sum(exp(x))) computed stably (the max is subtracted first).
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);
// (sum |x|^p)^(1/p); p = inf gives max |x|.
Tensor norm(const Tensor& x, double p = 2.0, const Shape& dims = {}, bool keepdim = false);
// Bool results.
Tensor any(const Tensor& x);
Tensor all(const Tensor& x);

// exp(x - max) / sum(exp(x - max)) along `dim`, computed stably.
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor& softmax_out(Tensor& out, const Tensor& x, int64_t dim);

}  // namespace memgrad
