// Backward formulas of the indexing family (registered as the family is completed).
#include "autograd/functions/registry.h"

namespace memgrad::autograd {

void register_indexing_ops() {}

}  // namespace memgrad::autograd
