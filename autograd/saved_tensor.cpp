// SavedTensor: save with its version, check on unpack, PyTorch's error texts.
#include "autograd/saved_tensor.h"

#include <string>
#include <utility>

#include "autograd/autograd_meta.h"
#include "autograd/error.h"
#include "autograd/graph.h"
#include "autograd/node.h"

namespace memgrad::autograd {
SavedTensor::SavedTensor(const Tensor& t, bool is_output, const SavedTensorHooks* hooks)
    : is_output_(is_output), defined_(t.defined()) {
  if (!t.defined()) return;
  const AutogradMeta* meta = t.impl()->autograd_meta();
  is_leaf_ = meta == nullptr || meta->grad_fn == nullptr;
  if (!is_output && !is_leaf_) {
    grad_fn_ = meta->grad_fn;
    output_nr_ = meta->output_nr;
  }
  if (is_output) output_nr_ = meta != nullptr ? meta->output_nr : 0;
  if (hooks != nullptr) {
    // The hooks own the data from here on; no version check applies (as in PyTorch).
    packed_ =
        std::make_unique<Packed>(Packed{hooks->pack(is_output ? t.detach() : t), hooks->unpack});
    return;
  }
  // Only a leaf that requires grad is kept as itself (its gradient accumulates through it; no
  // in-place op can give it a history later). Anything else is kept without its metadata: the
  // tensor's grad_fn may later be replaced by an in-place op whose node reaches this one (as in
  // x.sub_(x.amax(...)), where amax saved x), and holding the tensor itself would then be a
  // reference cycle that never frees the graph or its saved memory. A non-leaf's history is
  // restored from grad_fn_ at unpack.
  const bool keep_original = !is_output && is_leaf_ && t.requires_grad();
  data_ = keep_original ? t : t.detach();  // no history, so no cycle
  if (!is_output) original_ = t.impl_ptr();
  saved_version_ = t.version();
}

Tensor SavedTensor::unpack(const Node& owner) const {
  if (!defined_) return Tensor();
  if (released_) {
    throw AutogradError(
        "Trying to backward through the graph a second time (or directly access saved tensors "
        "after they have already been freed). Saved intermediate values of the graph are freed "
        "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
        "backward through the graph a second time or if you need to access saved tensors after "
        "calling backward.");
  }
  if (packed_) return packed_->unpack(packed_->value);
  const uint32_t current = data_.version();
  if (current != saved_version_) {
    // The producer the tensor has now: an in-place op that bumped the version also replaced
    // its grad_fn (PyTorch names that one, e.g. AddBackward0 after add_).
    std::shared_ptr<Node> producer_node = is_output_ ? nullptr : grad_fn_;
    uint32_t producer_output = output_nr_;
    if (const std::shared_ptr<TensorImpl> original = original_.lock()) {
      const AutogradMeta* meta = original->autograd_meta();
      producer_node = meta != nullptr ? meta->grad_fn : nullptr;
      producer_output = meta != nullptr ? meta->output_nr : 0;
    }
    // An output names its saving node as producer; a leaf has none.
    std::string producer;
    if (is_output_) {
      producer = owner.name();
      producer_output = output_nr_;
    } else if (producer_node) {
      producer = producer_node->name();
    }
    throw VersionCounterError(owner.name(), saved_version_, current, data_.sizes(), data_.dtype(),
                              std::move(producer), producer_output);
  }
  if (!is_output_ && grad_fn_) return alias_with_history(data_, Edge{grad_fn_, output_nr_});
  return data_;
}

void SavedTensor::release() {
  data_ = Tensor();
  packed_.reset();
  grad_fn_.reset();
  original_.reset();
  released_ = true;
}

}  // namespace memgrad::autograd
