// Autocast: a thread-local region in which eligible ops run in float16 (matmul family), float32
// (numerically sensitive ops), or the widest input type (promote ops).
#pragma once

#include <vector>

#include "engine/op_kind.h"
#include "engine/tensor.h"

namespace memgrad::autograd {

// Casts `inputs` in place according to `kind`'s autocast policy. Returns whether any cast was
// made. Called by the engine (through the seam) only inside an autocast region.
bool apply_autocast(OpKind kind, std::vector<Tensor>& inputs);

}  // namespace memgrad::autograd
