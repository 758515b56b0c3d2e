// Grad mode over the engine's thread-local flag.
#include "autograd/grad_mode.h"

#include "engine/autograd_seam.h"

namespace memgrad {

bool is_grad_enabled() { return grad_mode_enabled(); }
void set_grad_enabled(bool enabled) { set_grad_mode_enabled(enabled); }

}  // namespace memgrad
