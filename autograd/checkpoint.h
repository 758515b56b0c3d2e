// Activation checkpointing: trade compute for memory.
//
// checkpoint(fn, inputs) runs fn without recording (nothing inside it is saved for backward)
// and keeps only its inputs. In backward, fn runs again with grad mode on, from the same
// random-number state (so dropout draws the same mask) and the same autocast state, and its
// own backward runs at once: the segment's activations exist only during that recomputation.
// Gradients are identical to a plain run (bit-exact on the CPU, where kernels are
// deterministic). Cost: one extra forward of fn per backward.
//
// checkpoint_sequential(modules, segments, x) splits a chain of modules into `segments` parts
// (PyTorch's rule: len / segments modules each, the last part takes the rest) and checkpoints
// every part but the last. For n equal layers of activation size A the peak of kept
// activations drops from about n A to about (segments - 1) A + (n / segments) A, minimal near
// segments = sqrt(n).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "engine/nn/module.h"
#include "engine/tensor.h"

namespace memgrad::autograd {

using CheckpointFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Runs fn(inputs) keeping only the inputs for backward (see the file comment). Outside grad
// mode it is a plain call. Saves: the inputs (with version checks).
std::vector<Tensor> checkpoint(const CheckpointFunction& fn, const std::vector<Tensor>& inputs,
                               bool preserve_rng_state = true);

// One input, one output.
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  bool preserve_rng_state = true);

// Runs `modules` in order, checkpointing all but the last of `segments` parts. Throws
// ValueError unless 1 <= segments <= modules.size().
Tensor checkpoint_sequential(const std::vector<std::shared_ptr<nn::UnaryModule>>& modules,
                             int64_t segments, const Tensor& input);

}  // namespace memgrad::autograd
