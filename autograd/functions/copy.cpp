// Copies and casts: nothing is saved; gradients pass through, converted back to the input's
// dtype or device.
#include "autograd/functions/common.h"

namespace memgrad::autograd {
namespace {

// ---- clone (and contiguous's copy): d = g ----
struct Clone {
  static constexpr OpKind kind = OpKind::Clone;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode&, const Grads& g) { return {g[0]}; }
};

// ---- to(dtype): d = g in the input's dtype ----
struct ToDtype {
  static constexpr OpKind kind = OpKind::ToDtype;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) { return {g[0].to(n.input(0).dtype)}; }
};

// ---- to(device): d = g on the input's device ----
struct ToDevice {
  static constexpr OpKind kind = OpKind::ToDevice;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) { return {g[0].to(n.input(0).device)}; }
};

// ---- self.copy_(src): self's old value gets no gradient; src gets g summed to its shape, in
// its dtype and on its device ----
struct Copy {
  static constexpr OpKind kind = OpKind::Copy;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode& n, const Grads& g) {
    Tensor gsrc;
    if (n.needs_grad(1)) {
      const TensorMeta& src = n.input(1);
      gsrc = sum_to(g[0], src.sizes).to(src.dtype).to(src.device);
    }
    return {Tensor(), gsrc};
  }
};

// ---- fill_ / zero_ / uniform_ / normal_: the old value gets no gradient ----
struct Fill {
  static constexpr OpKind kind = OpKind::Fill;
  static void save(OpNode&, Inputs, Outputs) {}
  static Grads backward(OpNode&, const Grads&) { return {Tensor()}; }
};

}  // namespace

void register_copy_ops() {
  register_op<Clone>();
  register_op<ToDtype>();
  register_op<ToDevice>();
  register_op<Copy>();
  register_op<Fill>();
}

}  // namespace memgrad::autograd
