// Tanh: forwards to the elementwise op of the same name.
#include "engine/nn/tanh.h"

#include "engine/elementwise.h"

namespace memgrad::nn {

Tensor Tanh::forward(const Tensor& x) { return tanh(x); }

}  // namespace memgrad::nn
