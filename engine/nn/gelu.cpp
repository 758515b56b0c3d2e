// GELU: forwards to the elementwise op of the same name.
#include "engine/nn/gelu.h"

#include "engine/elementwise.h"

namespace memgrad::nn {

Tensor GELU::forward(const Tensor& x) { return gelu(x, tanh_); }

}  // namespace memgrad::nn
