// Backward formulas of the linalg family (registered as the family is completed).
#include "autograd/functions/registry.h"

namespace memgrad::autograd {

void register_linalg_ops() {}

}  // namespace memgrad::autograd
