// ReLU: forwards to the elementwise op of the same name.
#include "engine/nn/relu.h"

#include "engine/elementwise.h"

namespace memgrad::nn {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

}  // namespace memgrad::nn
