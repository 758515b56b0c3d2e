// Front-end helpers: result allocation, operands, device checks, seam calls.
#include "engine/op_support.h"

#include <fmt/format.h>

#include "allocator/error.h"
#include "base/object_pool.h"
#include "engine/error.h"
#include "engine/storage.h"

namespace memgrad::detail {

size_t storage_nbytes(const Shape& sizes, DType dtype) {
  for (int64_t s : sizes) {
    if (s < 0) {
      // PyTorch's wording, which names no op (op() is empty).
      throw ShapeError(fmt::format("Trying to create tensor with negative dimension {}: {}", s,
                                   to_string(sizes)),
                       "", ShapeRoles::given(sizes));
    }
  }
  size_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(numel_of(sizes)), element_size(dtype), &nbytes)) {
    throw ShapeError(fmt::format("Storage size calculation overflowed with sizes={} and dtype {}",
                                 to_string(sizes), dtype_name(dtype)),
                     "", ShapeRoles::given(sizes));
  }
  return nbytes;
}

Tensor new_tensor(const Shape& sizes, DType dtype, Device device) {
  auto storage = make_pooled<Storage>(storage_nbytes(sizes, dtype), device);
  return Tensor(
      make_pooled<TensorImpl>(std::move(storage), sizes, contiguous_strides(sizes), 0, dtype));
}

kernels::Operand operand(const Tensor& t) {
  kernels::Operand op;
  op.data = t.data_ptr();
  op.dtype = t.dtype();
  op.ndim = t.dim();
  const Shape& sizes = t.sizes();
  const Shape& strides = t.strides();
  for (int d = 0; d < op.ndim; ++d) {
    op.sizes[d] = sizes[d];
    op.strides[d] = strides[d];
  }
  return op;
}

kernels::Operand operand(const Tensor& t, const Shape& shape) {
  if (t.sizes() == shape) return operand(t);  // nothing broadcast: most ops' operands
  kernels::Operand op;
  op.data = t.data_ptr();
  op.dtype = t.dtype();
  op.ndim = shape.size();
  const Shape strides = broadcast_strides(t.sizes(), t.strides(), shape);
  for (int d = 0; d < op.ndim; ++d) {
    op.sizes[d] = shape[d];
    op.strides[d] = strides[d];
  }
  return op;
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  if (a.device() != b.device()) {
    throw DeviceError(
        fmt::format(
            "[{}] expected all tensors on the same device, but found {} and {}: move one with "
            ".to(device) first",
            op, a.device().str(), b.device().str()),
        op, {a.device().str(), b.device().str()});
  }
}

void check_defined(const char* op, const Tensor& t, const char* what) {
  if (!t.defined())
    throw ValueError(fmt::format("[{}] {} is an undefined tensor", op, what), op, what);
}

void record(OpKind kind, std::initializer_list<Tensor> inputs,
            std::initializer_list<Tensor> outputs, const OpAttrs& attrs) {
  autograd_seam()->record(kind, std::span<const Tensor>(inputs.begin(), inputs.size()),
                          std::span<const Tensor>(outputs.begin(), outputs.size()), attrs);
}

void record_outputs(OpKind kind, const Tensor& input, std::span<const Tensor> outputs,
                    const OpAttrs& attrs) {
  autograd_seam()->record(kind, std::span<const Tensor>(&input, 1), outputs, attrs);
}

InplaceRecord::InplaceRecord(OpKind kind, const Tensor& self, std::initializer_list<Tensor> others,
                             const OpAttrs& attrs) {
  AutogradSeam* seam = autograd_seam();
  if (seam == nullptr) return;
  // The seam also runs the leaf checks when grad mode is on and only `others` require grad.
  bool any = self.requires_grad();
  for (const Tensor& t : others) any = any || (t.defined() && t.requires_grad());
  if (!any || !grad_mode_enabled()) return;
  pending_ = seam->begin_inplace(kind, self, std::span<const Tensor>(others.begin(), others.size()),
                                 attrs);
}

void InplaceRecord::finish(const Tensor& self) {
  self.storage().bump_version();
  if (pending_) autograd_seam()->finish_inplace(pending_, self);
}

void prepare_out(Tensor& out, const Shape& sizes, DType dtype, Device device, const char* op) {
  check_defined(op, out, "out");
  if (out.device() != device) {
    throw DeviceError(fmt::format("[{}] out is on {} but the result is on {}", op,
                                  out.device().str(), device.str()),
                      op, {out.device().str(), device.str()});
  }
  if (out.dtype() != dtype) {
    throw DTypeError(fmt::format("[{}] out has dtype {} but the result has dtype {}", op,
                                 dtype_name(out.dtype()), dtype_name(dtype)),
                     op, {out.dtype(), dtype});
  }
  if (AutogradSeam* seam = autograd_seam(); seam != nullptr && grad_mode_enabled()) {
    seam->check_out(out, op);
  }
  if (out.sizes() == sizes) return;
  if (out.is_view()) {
    throw ShapeError(fmt::format("[{}] out is a view of shape {} and cannot be resized to {}", op,
                                 to_string(out.sizes()), to_string(sizes)),
                     op, ShapeRoles::wanted(sizes, out.sizes()));
  }
  // Resize like PyTorch: a new storage of the result's size (an allocation).
  out.impl()->set_storage(make_pooled<Storage>(storage_nbytes(sizes, dtype), device));
  out.impl()->set_layout(sizes, contiguous_strides(sizes), 0);
}

std::vector<Tensor> autocast(OpKind kind, std::initializer_list<Tensor> inputs) {
  std::vector<Tensor> out(inputs);
  if (autocast_enabled()) {
    if (AutogradSeam* seam = autograd_seam()) seam->autocast_inputs(kind, out);
  }
  return out;
}

}  // namespace memgrad::detail
