// Backward formulas of the reduce family (registered as the family is completed).
#include "autograd/functions/registry.h"

namespace memgrad::autograd {

void register_reduce_ops() {}

}  // namespace memgrad::autograd
