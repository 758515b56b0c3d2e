// Internal helpers for the op front-end (engine/*.cpp): allocating results, building kernel
// operands, device checks, and the calls into the autograd seam. Not part of the public API, and
// not part of the seam: autograd/ uses engine ops and backward_ops.h, never these. The kernel
// backend of a device comes from detail::kernels_for (device_backend.h).
//
// The shape of every front-end op:
//   validate -> (autocast) -> allocate the result or prepare `out` -> kernel -> record.
// For in-place ops the record is split around the kernel (InplaceRecord) and the version is
// bumped right after the kernel, before autograd rebases the history.
#pragma once

#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "engine/autograd_seam.h"
#include "engine/device_backend.h"
#include "engine/tensor.h"
#include "kernels/backend.h"

namespace memgrad::detail {

// A new contiguous tensor. Allocates: numel x element size on `device`.
Tensor new_tensor(const Shape& sizes, DType dtype, Device device);

// The bytes of a contiguous tensor of `sizes` and `dtype`: the one size computation every new
// storage goes through. Throws ShapeError for a negative size or when numel x element size
// overflows; the allocator then refuses anything above 1 EiB with an OutOfMemoryError.
size_t storage_nbytes(const Shape& sizes, DType dtype);

// The kernel view of `t`, or of `t` broadcast to `shape` (stride 0 along expanded dims).
kernels::Operand operand(const Tensor& t);
kernels::Operand operand(const Tensor& t, const Shape& shape);

// Throws DeviceError naming `op` and both devices when they differ.
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
// Throws Error naming `op` when `t` is undefined.
void check_defined(const char* op, const Tensor& t, const char* what = "input");

// Whether an op on these inputs must be recorded: grad mode is on, autograd is linked and
// some input requires grad. Cheap: a thread-local read and one flag per input.
inline bool should_record(std::initializer_list<const Tensor*> inputs) {
  if (!grad_mode_enabled()) return false;
  for (const Tensor* t : inputs) {
    if (t->defined() && t->requires_grad()) return autograd_seam() != nullptr;
  }
  return false;
}

// Records an out-of-place op (call only when should_record() was true).
void record(OpKind kind, std::initializer_list<Tensor> inputs,
            std::initializer_list<Tensor> outputs, const OpAttrs& attrs = {});

// Records an op with one input and any number of outputs (split, chunk, unbind: one node whose
// outputs are all the pieces).
void record_outputs(OpKind kind, const Tensor& input, std::span<const Tensor> outputs,
                    const OpAttrs& attrs);

// The two halves of recording an in-place op on `self`, around the kernel:
//   InplaceRecord rec(OpKind::Mul, self, {other}, attrs);  // checks, saves old values
//   kernel(...);
//   rec.finish(self);  // bumps the version, saves new values, rebases history
// The version is bumped even when nothing is recorded.
class InplaceRecord {
 public:
  InplaceRecord(OpKind kind, const Tensor& self, std::initializer_list<Tensor> others,
                const OpAttrs& attrs = {});
  void finish(const Tensor& self);

 private:
  std::shared_ptr<void> pending_;
};

// Makes `out` hold a result of `sizes` and `dtype` on `device`: unchanged when it already
// does (no allocation), otherwise resized with a new storage. Throws for an `out` that requires
// grad, lives on another device, or is a view that would need resizing.
void prepare_out(Tensor& out, const Shape& sizes, DType dtype, Device device, const char* op);

// Autocast: the inputs `kind` should run on (casts under an active autocast region, else the
// inputs unchanged).
std::vector<Tensor> autocast(OpKind kind, std::initializer_list<Tensor> inputs);

}  // namespace memgrad::detail
