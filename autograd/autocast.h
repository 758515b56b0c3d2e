// Autocast: mixed precision by op, inside a thread-local region (torch.autocast).
//
// Inside an AutocastGuard, eligible ops cast their floating inputs before running:
//   lower precision (float16, or bfloat16: float32's range, no GradScaler needed): mm, bmm,
//     matmul, addmm, linear (so their outputs, and what autograd saves of them, take half the
//     bytes);
//   float32: exp, log, pow, reciprocal, rsqrt, sum, mean, norm, logsumexp, softmax,
//     log_softmax, layer_norm, cross_entropy, mse_loss (numerically sensitive);
//   promote to the widest input: cat and where (plain binary ops promote by themselves).
// Ops not listed run in their inputs' dtype. Casts are ordinary recorded ops, so gradients flow
// back to float32 parameters in float32.
//
// Memory: a parameter (a leaf that requires grad, not a view) is cast once per region (and per
// lower-precision dtype, when regions of both nest) and the copy is cached until the outermost
// region exits (PyTorch's weight-cast cache); other casts are redone on every use. A cached cast
// keeps its gradient history even when made under no_grad, so a later grad-mode use in the
// region still reaches the parameter.
#pragma once

#include <vector>

#include "engine/op_kind.h"
#include "engine/tensor.h"

namespace memgrad::autograd {

// Enables (or, with enabled = false, disables) autocast for its scope; nests. Leaving the
// outermost enabled region clears the cast cache. Throws DTypeError when enabled with a dtype
// other than float16 or bfloat16.
class AutocastGuard {
 public:
  explicit AutocastGuard(bool enabled = true, DType dtype = kFloat16);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool previous_enabled_;
  DType previous_dtype_;
};

// The thread's autocast state (what checkpoint() restores for its recomputation).
struct AutocastState {
  bool enabled = false;
  DType dtype = kFloat16;
};
AutocastState autocast_state();

// Sets the state for its scope without touching the nesting count or the cache.
class AutocastStateGuard {
 public:
  explicit AutocastStateGuard(AutocastState state);
  ~AutocastStateGuard();
  AutocastStateGuard(const AutocastStateGuard&) = delete;
  AutocastStateGuard& operator=(const AutocastStateGuard&) = delete;

 private:
  AutocastState previous_;
};

// Number of parameter casts currently cached (for tests and the B14 example).
size_t autocast_cache_size();

// Casts `inputs` in place according to `kind`'s policy. Returns whether any cast was made.
// Called by the engine (through the seam) only inside an autocast region.
bool apply_autocast(OpKind kind, std::vector<Tensor>& inputs);

}  // namespace memgrad::autograd
