// Views: new layout data over the same storage. Never copy (reshape/flatten/contiguous copy
// only when the strides force it, as in PyTorch, and say so).
//
// Memory contract for the family:
//   Allocates: nothing (reshape: a copy of self when no view is possible).
//   Aliases:   self's storage; is_view() is true and the result shares self's version counter.
//   Version:   unchanged.
//   Saves for backward: nothing; backward needs only sizes (and for as_strided, the geometry).
// split, chunk and unbind return views recorded as one op with every piece an output (PyTorch's
// SplitBackward0 and UnbindBackward0): backward joins the pieces' gradients in one allocation of
// the input's shape, and an in-place op on a piece (or a view of one) while autograd records
// raises AutogradError, as in PyTorch.
// Errors: ShapeError for incompatible sizes (with "use .reshape(...) instead" when a view is
// impossible only because of the strides), IndexError for bad dims or indices.
#pragma once

#include <optional>
#include <vector>

#include "engine/tensor.h"

namespace memgrad {

Tensor view(const Tensor& x, const Shape& sizes);
Tensor reshape(const Tensor& x, const Shape& sizes);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor t(const Tensor& x);
Tensor mT(const Tensor& x);
Tensor permute(const Tensor& x, const Shape& dims);
Tensor expand(const Tensor& x, const Shape& sizes);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
// Throws IndexError when the view would read outside the storage.
Tensor as_strided(const Tensor& x, const Shape& sizes, const Shape& strides,
                  std::optional<int64_t> storage_offset = std::nullopt);
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes,
                          int64_t dim = 0);
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);

// Internal: a view of `x` with the given layout (sizes, strides in elements, storage offset in
// elements), recorded for autograd as AsStrided. For the rest of the engine (the functions above
// share its single construction path). Throws IndexError when the layout reaches outside the
// storage. Allocates: nothing. Aliases: x's storage (view_base = x's root base).
Tensor make_view(const Tensor& x, const Shape& sizes, const Shape& strides, int64_t offset);

}  // namespace memgrad
