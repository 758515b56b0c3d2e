// Grad mode guards over the engine's thread-local flag.
#include "autograd/grad_mode.h"

#include "engine/autograd_seam.h"

namespace memgrad {

bool is_grad_enabled() { return grad_mode_enabled(); }
void set_grad_enabled(bool enabled) { set_grad_mode_enabled(enabled); }

NoGradGuard::NoGradGuard() : previous_(grad_mode_enabled()) { set_grad_mode_enabled(false); }
NoGradGuard::~NoGradGuard() { set_grad_mode_enabled(previous_); }

EnableGradGuard::EnableGradGuard() : previous_(grad_mode_enabled()) {
  set_grad_mode_enabled(true);
}
EnableGradGuard::~EnableGradGuard() { set_grad_mode_enabled(previous_); }

}  // namespace memgrad
