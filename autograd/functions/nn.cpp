// Backward formulas of the nn ops (layer_norm, losses, dropout), registered as they are added.
#include "autograd/functions/registry.h"

namespace memgrad::autograd {

void register_nn_ops() {}

}  // namespace memgrad::autograd
