// Hooks: on tensor gradients, and on saved tensors (pack/unpack).
//
// Tensor hooks see a tensor's gradient during backward and may replace it. Saved-tensor hooks
// decide how a tensor saved for backward is stored: pack runs once when an op saves it, unpack
// every time backward needs it. save_on_host is the ready-made pair that moves saved
// activations to host memory during forward and back to their device in backward, trading
// transfer time for device memory (PyTorch's torch.autograd.graph.save_on_cpu).
#pragma once

#include <cstddef>
#include <functional>

#include "autograd/autograd_meta.h"
#include "autograd/saved_tensor.h"

namespace memgrad::autograd {

// Registers `hook` on t's gradient (t must require grad). Returns the hook's index.
size_t register_hook(const Tensor& t, GradHook hook);

// Installs a pack/unpack pair for every tensor saved in its scope on this thread. When nested,
// the innermost pair applies. An empty hook is an AutogradError.
class SavedTensorHooksGuard {
 public:
  SavedTensorHooksGuard(PackHook pack, UnpackHook unpack);
  ~SavedTensorHooksGuard();
  SavedTensorHooksGuard(const SavedTensorHooksGuard&) = delete;
  SavedTensorHooksGuard& operator=(const SavedTensorHooksGuard&) = delete;
};

// The innermost active pair on this thread, or null.
const SavedTensorHooks* current_saved_tensor_hooks();

// Saved tensors go to host memory (cpu; pinned when `pin_memory` and the CUDA backend is
// present) at save time and come back to their device when backward unpacks them. Saved
// tensors already on the cpu are kept as they are.
class SaveOnHostGuard {
 public:
  explicit SaveOnHostGuard(bool pin_memory = false);

 private:
  SavedTensorHooksGuard guard_;
};

// Calls `observe` with every tensor saved in its scope on this thread and keeps the tensor as it
// is: a census of what a forward saves (examples B14 and train_charlm sort it into parts). As
// with any pack hook, a tensor it saw is not version-checked at unpack.
class ObserveSavedTensorsGuard {
 public:
  explicit ObserveSavedTensorsGuard(std::function<void(const Tensor&)> observe);

 private:
  SavedTensorHooksGuard guard_;
};

}  // namespace memgrad::autograd
