// SavedTensor: a tensor kept for backward, with the version it had when it was saved.
//
// Saving keeps the tensor's storage alive: that is the memory an op's backward costs until the
// node runs. Unpacking checks the storage's version counter: if an in-place op changed the
// tensor after it was saved, the gradient would silently be wrong, so unpack throws PyTorch's
// error instead. After release() (the node ran without retain_graph) unpack throws the "backward
// through the graph a second time" error. With saved-tensor hooks active at save time the hooks
// own the data (pack runs once at save, unpack on every use) and no version check is made, as
// in PyTorch.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/tensor.h"

namespace memgrad::autograd {

class Node;

// Pack/unpack hooks for saved tensors (see hooks.h for the scoped guard that installs them).
using PackHook = std::function<std::any(const Tensor&)>;
using UnpackHook = std::function<Tensor(const std::any&)>;

struct SavedTensorHooks {
  PackHook pack;
  UnpackHook unpack;
};

class SavedTensor {
 public:
  SavedTensor() = default;
  // Saves `t`. `is_output`: t is an output of `owner` (stored without history). `hooks`: the
  // innermost active pack/unpack pair, or null.
  SavedTensor(const Tensor& t, bool is_output, const SavedTensorHooks* hooks);

  // The saved tensor. `owner` names the saving node in error messages. Throws
  // VersionCounterError (an AutogradError) when the tensor changed in place since it was saved,
  // AutogradError after release().
  Tensor unpack(const Node& owner) const;
  // Drops the data (and packed state); later unpacks throw.
  void release();
  bool defined() const { return defined_; }

 private:
  // What the pack hook returned and the unpack hook to call, when hooks were active (apart, so a
  // tensor saved without hooks, nearly every one, carries a pointer and not both).
  struct Packed {
    std::any value;
    UnpackHook unpack;
  };

  Tensor data_;  // a leaf requiring grad itself; else data without history
  std::unique_ptr<Packed> packed_;
  std::shared_ptr<Node> grad_fn_;  // the input's producing node when saved
  // The saved tensor itself, not kept alive: at a version mismatch, the error names the grad_fn
  // it has then (an in-place op replaced it), as PyTorch does.
  std::weak_ptr<TensorImpl> original_;
  uint32_t output_nr_ = 0;
  uint32_t saved_version_ = 0;
  bool is_output_ = false;
  bool is_leaf_ = false;
  bool defined_ = false;
  bool released_ = false;
};

}  // namespace memgrad::autograd
