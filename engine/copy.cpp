// Copies and conversions: same device through the device's copy kernel; across devices
// through the device backend.
#include "engine/copy.h"

#include <fmt/format.h>

#include "allocator/trace.h"
#include "engine/device_backend.h"
#include "engine/error.h"
#include "engine/op_support.h"

namespace memgrad {
namespace {

using detail::kernels_for;
using detail::new_tensor;
using detail::operand;
using detail::should_record;

// A new contiguous copy of x in `dtype` on x's device (no autograd record).
Tensor converted(const Tensor& x, DType dtype) {
  Tensor out = new_tensor(x.sizes(), dtype, x.device());
  if (x.numel() > 0) kernels_for(x.device()).copy(operand(out), operand(x));
  return out;
}

}  // namespace

Tensor to_dtype(const Tensor& x, DType dtype) {
  detail::check_defined("to", x);
  if (x.dtype() == dtype) return x;
  TraceOpScope trace("to");
  Tensor out = converted(x, dtype);
  if (should_record({&x}) && is_floating(dtype)) detail::record(OpKind::ToDtype, {x}, {out});
  return out;
}

Tensor to_device(const Tensor& x, Device device, bool non_blocking) {
  detail::check_defined("to", x);
  if (x.device() == device) return x;
  TraceOpScope trace("to");
  Tensor out = new_tensor(x.sizes(), x.dtype(), device);
  copy_across_devices(out, x.contiguous(), non_blocking);
  if (should_record({&x})) detail::record(OpKind::ToDevice, {x}, {out});
  return out;
}

Tensor clone(const Tensor& x) {
  detail::check_defined("clone", x);
  TraceOpScope trace("clone");
  Tensor out = converted(x, x.dtype());
  if (should_record({&x})) detail::record(OpKind::Clone, {x}, {out});
  return out;
}

Tensor contiguous(const Tensor& x) {
  detail::check_defined("contiguous", x);
  if (x.is_contiguous()) return x;
  return clone(x);
}

Tensor& copy_(Tensor& self, const Tensor& src, bool non_blocking) {
  detail::check_defined("copy_", self, "self");
  detail::check_defined("copy_", src, "src");
  TraceOpScope trace("copy_");
  const Shape shape = broadcast_shapes(self.sizes(), src.sizes(), "copy_");
  if (!(shape == self.sizes())) {
    throw ShapeError(fmt::format("[copy_] src of shape {} cannot be broadcast to self's shape {}",
                                 to_string(src.sizes()), to_string(self.sizes())),
                     "copy_", ShapeRoles::wanted(self.sizes(), src.sizes()));
  }
  detail::InplaceRecord rec(OpKind::Copy, self, {src});
  if (src.device() == self.device()) {
    if (self.numel() > 0) kernels_for(self.device()).copy(operand(self), operand(src, shape));
  } else {
    // Across devices: convert and lay out on the source side, then one transfer.
    Tensor staged = src.expand(shape).to(self.dtype()).contiguous();
    if (self.is_contiguous()) {
      copy_across_devices(self, staged, non_blocking);
    } else {
      Tensor landed = new_tensor(shape, self.dtype(), self.device());
      copy_across_devices(landed, staged, non_blocking);
      kernels_for(self.device()).copy(operand(self), operand(landed));
    }
  }
  rec.finish(self);
  return self;
}

Tensor pin_memory(const Tensor& x) { return pin_memory_copy(x); }

bool is_pinned(const Tensor& x) { return x.defined() && storage_is_pinned(x.storage()); }

Tensor& fill_(Tensor& self, Scalar value) {
  detail::check_defined("fill_", self);
  value.check_fits(self.dtype(), "fill_");
  TraceOpScope trace("fill_");
  detail::InplaceRecord rec(OpKind::Fill, self, {}, FillAttrs{value.to_double()});
  if (self.numel() > 0) kernels_for(self.device()).fill(operand(self), value.to_double());
  rec.finish(self);
  return self;
}

Tensor& zero_(Tensor& self) { return fill_(self, 0); }

}  // namespace memgrad
