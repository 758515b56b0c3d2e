// Reading numbers out of tensors in a program that may run on a meta device (meta:N: shapes,
// no values; docs/estimate.md). There the tensors are made and freed as in a real run, in the
// same order (the argument is the same expression), and the number is 0.
#pragma once

#include "engine/tensor.h"

namespace memgrad::examples {

// t.item<T>(), or T{} on a meta device.
template <typename T>
T value_or_zero(const Tensor& t) {
  return t.device().is_meta() ? T{} : t.item<T>();
}

}  // namespace memgrad::examples
