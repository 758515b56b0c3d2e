// Backward formulas of the views family (registered as the family is completed).
#include "autograd/functions/registry.h"

namespace memgrad::autograd {

void register_view_ops() {}

}  // namespace memgrad::autograd
