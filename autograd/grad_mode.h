// Grad mode: whether ops record the graph. Thread-local, on by default.
//
// Under NoGradGuard nothing is recorded and nothing is saved for backward, so a forward pass
// holds only its outputs: the memory difference from a grad-mode forward is exactly the saved
// activations. In-place ops on leaves that require grad are allowed there (optimizers and
// initialisers rely on it).
#pragma once

#include "engine/autograd_seam.h"

namespace memgrad {

bool is_grad_enabled();
void set_grad_enabled(bool enabled);

// Disables recording for its scope (torch.no_grad()), and restores the previous mode on exit,
// exceptions included.
class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

// Enables recording for its scope (torch.enable_grad()), e.g. inside a NoGradGuard.
class EnableGradGuard : public GradModeGuard {
 public:
  EnableGradGuard() : GradModeGuard(true) {}
};

}  // namespace memgrad
