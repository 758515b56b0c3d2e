// TensorImpl: what a tensor is. A storage, a layout over it, a dtype, and autograd slots.
//
// The layout is plain data (sizes, strides in elements, storage offset in elements); a view is
// a new TensorImpl with its own layout over the same Storage, so it costs no device memory.
// Autograd state sits behind a pointer to a type this layer never sees (AutogradMeta, defined by
// autograd/): the engine only reads the `requires_grad` flag that autograd keeps up to date.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/shape.h"
#include "engine/storage.h"

namespace memgrad {

struct AutogradMeta;  // defined in autograd/autograd_meta.h

// Destroys AutogradMeta through the autograd seam (the engine cannot see its definition).
struct AutogradMetaDeleter {
  void operator()(AutogradMeta* meta) const;
};

class TensorImpl {
 public:
  // A tensor over `storage` with the given layout. Allocates: nothing.
  TensorImpl(std::shared_ptr<Storage> storage, const Shape& sizes, const Shape& strides,
             int64_t storage_offset, DType dtype);

  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const { return strides_; }           // in elements
  int64_t storage_offset() const { return storage_offset_; }  // in elements
  int ndim() const { return sizes_.size(); }
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_->device(); }
  bool is_contiguous() const { return contiguous_; }

  Storage& storage() const { return *storage_; }
  const std::shared_ptr<Storage>& storage_ptr() const { return storage_; }
  // Address of element [0, ..., 0].
  void* data() const {
    return static_cast<char*>(storage_->data()) +
           storage_offset_ * static_cast<int64_t>(element_size(dtype_));
  }

  // Replaces the layout in place (used by in-place metadata changes such as detach_ and the
  // resize of an `out=` tensor). Allocates: nothing.
  void set_layout(const Shape& sizes, const Shape& strides, int64_t storage_offset);
  void set_storage(std::shared_ptr<Storage> storage) { storage_ = std::move(storage); }
  // Takes `other`'s storage, layout and dtype, keeping this tensor's identity and autograd state
  // (PyTorch's set_data: how Module::to() moves parameters without replacing them).
  void set_data(const TensorImpl& other);

  // Views: the tensor whose storage this view aliases (the root of a chain of views, as in
  // PyTorch), or null for a tensor that owns its storage.
  bool is_view() const { return view_base_ != nullptr; }
  const std::shared_ptr<TensorImpl>& view_base() const { return view_base_; }
  void set_view_base(std::shared_ptr<TensorImpl> base) { view_base_ = std::move(base); }
  // Whether this view is a piece of split, chunk or unbind (one op with several view outputs),
  // or a view of such a piece: autograd refuses in-place ops on it, as PyTorch does. Views made
  // from it inherit the mark.
  bool from_multi_output_view() const { return from_multi_output_view_; }
  void mark_from_multi_output_view() { from_multi_output_view_ = true; }

  // Autograd slots, written only by autograd/.
  bool requires_grad() const { return requires_grad_; }
  void set_requires_grad_flag(bool value) { requires_grad_ = value; }
  AutogradMeta* autograd_meta() const { return autograd_meta_.get(); }
  void set_autograd_meta(AutogradMeta* meta) { autograd_meta_.reset(meta); }

 private:
  std::shared_ptr<Storage> storage_;
  Shape sizes_;
  Shape strides_;
  int64_t storage_offset_ = 0;
  int64_t numel_ = 0;
  DType dtype_;
  bool contiguous_ = true;
  bool requires_grad_ = false;  // a leaf that requires grad, or an output with a grad_fn
  bool from_multi_output_view_ = false;
  std::shared_ptr<TensorImpl> view_base_;
  std::unique_ptr<AutogradMeta, AutogradMetaDeleter> autograd_meta_;
};

}  // namespace memgrad
