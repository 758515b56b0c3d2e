// Host-side arithmetic on an Operand's layout that both backends' launchers use: the element
// offset of a flat (row-major) position, and the "restrided" view that walks one operand with
// another's sizes (PyTorch's restride trick for gather, scatter_add and one_hot). Pure
// functions on operand metadata: nothing is allocated or read through `data`. Inline because
// the reductions call element_offset once per output.
#pragma once

#include <cstdint>

#include "kernels/kernel_args.h"

namespace memgrad::kernels {

// Offset in elements of flat (row-major) position `flat` of `op`.
inline int64_t element_offset(const Operand& op, int64_t flat) {
  int64_t off = 0;
  for (int d = op.ndim - 1; d >= 0 && flat > 0; --d) {
    off += (flat % op.sizes[d]) * op.strides[d];
    flat /= op.sizes[d];
  }
  return off;
}

// `t` read with `like`'s sizes (its own strides), and stride 0 along `dim` when dim >= 0.
inline Operand restrided(const Operand& t, const Operand& like, int dim) {
  Operand r = t;
  r.ndim = like.ndim;
  for (int d = 0; d < like.ndim; ++d) r.sizes[d] = like.sizes[d];
  if (dim >= 0) r.strides[dim] = 0;
  return r;
}

}  // namespace memgrad::kernels
