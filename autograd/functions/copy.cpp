// Copies and casts: gradients pass through, converted back to the input's dtype or device.
#include "autograd/functions/common.h"
#include "autograd/functions/registry.h"

namespace memgrad::autograd {
namespace {

using Grads = std::vector<Tensor>;

void record_plain(OpKind kind, std::span<const Tensor> in, std::span<const Tensor> out,
                  const OpAttrs& a) {
  node_for(kind, in, out, a);
}

template <OpKind K>
void record(std::span<const Tensor> in, std::span<const Tensor> out, const OpAttrs& a) {
  record_plain(K, in, out, a);
}

// d clone(x) = g (also contiguous's copy)
Grads pass_backward(OpNode&, const Grads& g) { return {g[0]}; }

// d to(x, dtype) = g in x's dtype
Grads to_dtype_backward(OpNode& n, const Grads& g) { return {g[0].to(n.input(0).dtype)}; }

// d to(x, device) = g on x's device
Grads to_device_backward(OpNode& n, const Grads& g) { return {g[0].to(n.input(0).device)}; }

// self.copy_(src): self's old value gets no gradient; src gets g summed to its shape, in its
// dtype and device.
Grads copy_backward(OpNode& n, const Grads& g) {
  Tensor gsrc;
  if (n.needs_grad(1)) {
    gsrc = sum_to(g[0], n.input(1).sizes).to(n.input(1).dtype).to(n.input(1).device);
  }
  return {Tensor(), gsrc};
}

// fill_ / zero_ / random fills: the old value gets no gradient.
Grads fill_backward(OpNode&, const Grads&) { return {Tensor()}; }

}  // namespace

void register_copy_ops() {
  set_op_entry(OpKind::Clone, {record<OpKind::Clone>, pass_backward});
  set_op_entry(OpKind::ToDtype, {record<OpKind::ToDtype>, to_dtype_backward});
  set_op_entry(OpKind::ToDevice, {record<OpKind::ToDevice>, to_device_backward});
  set_op_entry(OpKind::Copy, {record<OpKind::Copy>, copy_backward});
  set_op_entry(OpKind::Fill, {record<OpKind::Fill>, fill_backward});
}

}  // namespace memgrad::autograd
