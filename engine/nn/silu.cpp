// SiLU: forwards to the elementwise op of the same name.
#include "engine/nn/silu.h"

#include "engine/elementwise.h"

namespace memgrad::nn {

Tensor SiLU::forward(const Tensor& x) { return silu(x); }

}  // namespace memgrad::nn
