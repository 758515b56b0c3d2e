// TensorImpl: layout bookkeeping, and AutogradMeta's deleter through the seam.
#include "engine/tensor_impl.h"

#include "engine/autograd_seam.h"

namespace memgrad {

void AutogradMetaDeleter::operator()(AutogradMeta* meta) const {
  if (meta != nullptr) autograd_seam()->destroy_meta(meta);
}

TensorImpl::TensorImpl(std::shared_ptr<Storage> storage, const Shape& sizes, const Shape& strides,
                       int64_t storage_offset, DType dtype)
    : storage_(std::move(storage)), dtype_(dtype) {
  set_layout(sizes, strides, storage_offset);
}

void TensorImpl::set_data(const TensorImpl& other) {
  storage_ = other.storage_;
  dtype_ = other.dtype_;
  view_base_ = other.view_base_;
  set_layout(other.sizes_, other.strides_, other.storage_offset_);
}

void TensorImpl::set_layout(const Shape& sizes, const Shape& strides, int64_t storage_offset) {
  sizes_ = sizes;
  strides_ = strides;
  storage_offset_ = storage_offset;
  numel_ = numel_of(sizes);
  contiguous_ = is_contiguous_layout(sizes, strides);
}

}  // namespace memgrad
