// Grad mode: whether ops record the graph. Thread-local, on by default.
//
// Under NoGradGuard nothing is recorded and nothing is saved for backward, so a forward pass
// holds only its outputs: the memory difference from a grad-mode forward is exactly the saved
// activations. In-place ops on leaves that require grad are allowed there (optimizers and
// initialisers rely on it).
#pragma once

namespace memgrad {

bool is_grad_enabled();
void set_grad_enabled(bool enabled);

// Disables recording for its scope (torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Enables recording for its scope (torch.enable_grad()), e.g. inside a NoGradGuard.
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace memgrad
