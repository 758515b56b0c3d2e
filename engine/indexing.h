// Index ops and joining: index_select, gather, scatter_add, embedding, masked_fill, one_hot,
// cat, stack, pad.
//
// Memory contract for the family:
//   Allocates: the result (scatter_add_ and masked_fill_ allocate nothing: in-place). Two
//              small temporaries, freed before return: embedding copies non-contiguous indices
//              to a contiguous tensor; one_hot with num_classes < 0 reads max() (a 0-d tensor).
//   Aliases:   nothing. Version: bumped by the in-place forms.
//   Saves for backward (the indices, never the data):
//     index_select, gather, scatter_add: the index
//     embedding: the indices
//     masked_fill: the mask
//     cat, stack, pad: nothing
// Indices are int64; an index out of range throws IndexError naming the op, the index value,
// the dim and its size.
#pragma once

#include <vector>

#include "engine/scalar.h"
#include "engine/tensor.h"

namespace memgrad {

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// self + src scattered into positions index along dim (duplicates accumulate).
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
// weight[indices]: (*indices.shape, embedding_dim).
Tensor embedding(const Tensor& weight, const Tensor& indices);
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
Tensor& masked_fill_(Tensor& x, const Tensor& mask, Scalar value);
// int64 labels -> (*labels.shape, num_classes) int64 (num_classes < 0: max label + 1).
Tensor one_hot(const Tensor& labels, int64_t num_classes = -1);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Constant padding, PyTorch order: (left, right) of the last dim, then the one before, ...
Tensor pad(const Tensor& x, const std::vector<int64_t>& padding, Scalar value = 0);

}  // namespace memgrad
