// Copies and conversions between dtypes and devices, and filling a tensor with one value.
//
// Memory contract for the family:
//   to(dtype) / to(device) / clone / contiguous (when not contiguous):
//     Allocates: numel x the result's element size on the result's device.
//     Returns self (allocating nothing) when nothing would change.
//   copy_(self, src): Allocates nothing; bumps self's version; src broadcasts to self and is
//     converted to self's dtype and device.
//   fill_(self, value) / zero_(self): Allocates nothing; bumps self's version.
//   Saves for backward: nothing. to, clone and copy_ pass gradients through, converted back;
//     fill_, zero_, uniform_ and normal_ give the overwritten values no gradient.
#pragma once

#include "engine/tensor.h"

namespace memgrad {

Tensor to_dtype(const Tensor& x, DType dtype);
Tensor to_device(const Tensor& x, Device device, bool non_blocking = false);
Tensor clone(const Tensor& x);
Tensor contiguous(const Tensor& x);
Tensor& copy_(Tensor& self, const Tensor& src, bool non_blocking = false);
// Writes `value` (which must fit self's dtype: ValueError otherwise) into every element of
// self. Saves (autograd): nothing; the gradient through self is zero.
Tensor& fill_(Tensor& self, Scalar value);
Tensor& zero_(Tensor& self);
Tensor pin_memory(const Tensor& x);
bool is_pinned(const Tensor& x);

}  // namespace memgrad
