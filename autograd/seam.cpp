// autograd's implementation of the engine's AutogradSeam, installed when this file is linked.
//
// Out-of-place ops go straight to their recorder. In-place ops are recorded in two steps: before
// the kernel, the leaf checks run and self's old history (and, where the formula needs it, a
// copy of its old value) is captured; after the kernel the op's node is built on that old
// history and becomes self's grad_fn. An in-place op on a view rewrites part of its base, so the
// base gets a CopySlices node and the view becomes an as_strided view of the base's new history.
#include <fmt/format.h>

#include "autograd/autocast.h"
#include "autograd/backward.h"
#include "autograd/copy_slices.h"
#include "autograd/error.h"
#include "autograd/functions/registry.h"
#include "autograd/grad_mode.h"
#include "autograd/graph.h"
#include "autograd/hooks.h"
#include "base/object_pool.h"

namespace memgrad::autograd {
namespace {

struct PendingInplace {
  OpKind kind;
  OpAttrs attrs;
  Tensor old_self;  // self's old value (or a copy of it) with self's old history
  std::vector<Tensor> others;
  bool on_view = false;
  Tensor base;     // the view's base
  Edge base_edge;  // the base's history before the op
};

// PyTorch refuses in-place ops on the pieces of split, chunk and unbind (and on views of them)
// while autograd records: one node produced all the pieces, and it cannot be rebuilt around one.
[[noreturn]] void throw_multi_output_view_inplace(const Tensor& self) {
  const AutogradMeta* meta = self.impl()->autograd_meta();
  const std::string what =
      meta != nullptr && meta->grad_fn
          ? fmt::format("Output {} of {} is a view and is being modified inplace.", meta->output_nr,
                        meta->grad_fn->name())
          : std::string(
                "A view that does not require grad is being modified inplace by an op "
                "whose other inputs require grad.");
  throw AutogradError(what +
                      " This view is the output of a function that returns multiple views. Such "
                      "functions do not allow the output views to be modified inplace. You should "
                      "replace the inplace operation by an out-of-place one.");
}

bool is_leaf_requiring_grad(const Tensor& t) {
  const AutogradMeta* meta = t.impl()->autograd_meta();
  return t.requires_grad() && (meta == nullptr || meta->grad_fn == nullptr);
}

class Seam final : public AutogradSeam {
 public:
  void record(OpKind kind, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
              const OpAttrs& attrs) override {
    record_op(kind, inputs, outputs, attrs);
  }

  std::shared_ptr<void> begin_inplace(OpKind kind, const Tensor& self,
                                      std::span<const Tensor> others,
                                      const OpAttrs& attrs) override {
    const bool self_view = self.is_view();
    const Tensor base = self_view ? view_base_of(self) : Tensor();
    if (is_leaf_requiring_grad(self)) {
      throw AutogradError(
          "a leaf Variable that requires grad is being used in an in-place "
          "operation.");
    }
    if (self_view && is_leaf_requiring_grad(base)) {
      throw AutogradError(
          "a view of a leaf Variable that requires grad is being used in an "
          "in-place operation.");
    }
    bool others_need = false;
    for (const Tensor& o : others) others_need = others_need || (o.defined() && o.requires_grad());
    if (!self.requires_grad() && !others_need) return nullptr;
    if (self_view && self.impl()->from_multi_output_view()) throw_multi_output_view_inplace(self);
    const OpEntry& entry = op_entry(kind);
    if (entry.backward == nullptr) {
      throw AutogradError(
          fmt::format("[{}_] this in-place op has no backward formula in memgrad", op_name(kind)));
    }
    auto pending = std::make_shared<PendingInplace>();
    pending->kind = kind;
    pending->attrs = attrs;
    pending->others.assign(others.begin(), others.end());
    const bool for_self =
        entry.reads_self == ReadsSelf::ForSelfGrad || entry.reads_self == ReadsSelf::Always;
    const bool for_others =
        entry.reads_self == ReadsSelf::ForOtherGrads || entry.reads_self == ReadsSelf::Always;
    const bool copy = (for_self && self.requires_grad()) || (for_others && others_need);
    Tensor value = self;
    if (copy) {
      NoGradGuard no_grad;
      value = self.clone();  // the formula needs the values about to be overwritten
    }
    pending->old_self = alias_with_history(value, gradient_edge(self));
    if (self_view) {
      pending->on_view = true;
      pending->base = base;
      pending->base_edge = gradient_edge(base);
    }
    return pending;
  }

  void finish_inplace(const std::shared_ptr<void>& handle, const Tensor& self) override {
    auto& p = *static_cast<PendingInplace*>(handle.get());
    std::vector<Tensor> inputs = {p.old_self};
    inputs.insert(inputs.end(), p.others.begin(), p.others.end());
    if (!p.on_view) {
      const Tensor outputs[] = {self};
      record_op(p.kind, inputs, outputs, p.attrs);  // self's new grad_fn
      return;
    }
    // The op's own node, built on a temporary alias so self's history is set below instead.
    const Tensor out = alias_with_history(self, Edge{});
    const Tensor outputs[] = {out};
    record_op(p.kind, inputs, outputs, p.attrs);
    const std::shared_ptr<Node> fn = meta_of(out).grad_fn;
    rebase_onto_base(p, self, fn);
  }

  void check_out(const Tensor& out, const char* op) override {
    if (out.requires_grad()) {
      throw AutogradError(
          fmt::format("{}(): functions with out=... arguments don't support "
                      "automatic differentiation, but one of the arguments "
                      "requires grad.",
                      op));
    }
  }

  void set_requires_grad(const Tensor& t, bool requires_grad) override {
    AutogradMeta* meta = t.impl()->autograd_meta();
    if (meta != nullptr && meta->grad_fn) {
      if (requires_grad) return;
      throw AutogradError(
          "you can only change requires_grad flags of leaf variables. If you "
          "want to use a computed variable in a subgraph that doesn't require "
          "differentiation use var_no_grad = var.detach().");
    }
    if (requires_grad && !is_floating(t.dtype())) {
      throw AutogradError(
          fmt::format("only Tensors of floating point dtype can require "
                      "gradients (got {})",
                      dtype_name(t.dtype())));
    }
    meta_of(t).leaf_requires_grad = requires_grad;
    t.impl()->set_requires_grad_flag(requires_grad);
  }

  bool is_leaf(const Tensor& t) override {
    const AutogradMeta* meta = t.impl()->autograd_meta();
    return meta == nullptr || meta->grad_fn == nullptr;
  }

  Tensor grad(const Tensor& t) override {
    const AutogradMeta* meta = t.impl()->autograd_meta();
    return meta == nullptr ? Tensor() : meta->grad;
  }

  void set_grad(const Tensor& t, const Tensor& g) override {
    if (g.defined() && !(g.sizes() == t.sizes())) {
      throw AutogradError(
          fmt::format("assigned grad has data of a different size: {} vs the "
                      "tensor's {}",
                      to_string(g.sizes()), to_string(t.sizes())));
    }
    meta_of(t).grad = g;
  }

  std::string grad_fn_name(const Tensor& t) override {
    const AutogradMeta* meta = t.impl()->autograd_meta();
    return meta != nullptr && meta->grad_fn ? meta->grad_fn->name() : std::string();
  }

  void retain_grad(const Tensor& t) override {
    if (!t.requires_grad()) {
      throw AutogradError("can't retain_grad on Tensor that has requires_grad=False");
    }
    AutogradMeta& meta = meta_of(t);
    if (!meta.grad_fn || meta.retains_grad) return;  // leaves keep their grad anyway
    meta.retains_grad = true;
    std::weak_ptr<TensorImpl> weak = t.impl_ptr();
    meta.grad_fn->output_hooks().emplace_back(meta.output_nr, [weak](const Tensor& g) {
      if (auto impl = weak.lock()) {
        AutogradMeta& m = meta_of(Tensor(impl));
        m.grad = m.grad.defined() ? m.grad + g : g.clone();
      }
      return Tensor();
    });
  }

  void register_hook(const Tensor& t, std::function<Tensor(const Tensor&)> hook) override {
    autograd::register_hook(t, std::move(hook));
  }

  void register_post_accumulate_grad_hook(const Tensor& t,
                                          std::function<void(const Tensor&)> hook) override {
    if (!t.requires_grad()) {
      throw AutogradError("cannot register a hook on a tensor that doesn't require gradient");
    }
    AutogradMeta& meta = meta_of(t);
    if (meta.grad_fn) {
      throw AutogradError("post accumulate grad hooks cannot be registered on non-leaf tensors");
    }
    meta.post_accumulate_hooks.push_back(std::move(hook));
  }

  bool retains_grad(const Tensor& t) override {
    const AutogradMeta* meta = t.impl()->autograd_meta();
    return meta != nullptr && meta->retains_grad;
  }

  void backward(const Tensor& t, const Tensor& gradient, bool retain_graph,
                bool create_graph) override {
    autograd::backward({t}, {gradient}, retain_graph, create_graph);
  }

  void detach_(const Tensor& t) override {
    if (t.is_view()) throw AutogradError("Can't detach views in-place. Use detach() instead.");
    if (AutogradMeta* meta = t.impl()->autograd_meta()) {
      meta->grad_fn.reset();
      meta->output_nr = 0;
      meta->leaf_requires_grad = false;
    }
    t.impl()->set_requires_grad_flag(false);
  }

  void destroy_meta(AutogradMeta* meta) override { pool_delete(meta); }

  bool autocast_inputs(OpKind kind, std::vector<Tensor>& inputs) override {
    return apply_autocast(kind, inputs);
  }

 private:
  // In-place op `fn` on the view `self`: its base gets a CopySlices node over fn, and the view
  // becomes an as_strided view of the base's new history.
  static void rebase_onto_base(PendingInplace& p, const Tensor& self,
                               const std::shared_ptr<Node>& fn) {
    const Tensor& base = p.base;
    if (!base.is_contiguous() || base.storage_offset() != 0) {
      throw AutogradError(fmt::format(
          "in-place operation on a view of a non-contiguous tensor of shape {} is not supported "
          "by memgrad's autograd; call .contiguous() or .clone() on the base first",
          to_string(base.sizes())));
    }
    auto copy = std::make_shared<CopySlices>(TensorMeta(base), TensorMeta(self), fn);
    copy->next_edges().push_back(p.base_edge);
    for (size_t i = 1; i < fn->next_edges().size(); ++i) {
      copy->next_edges().push_back(fn->next_edges()[i]);
    }
    copy->output_meta().emplace_back(base);
    set_history(base, 0, copy);
    const Tensor inputs[] = {base};
    const Tensor outputs[] = {self};
    record_op(OpKind::AsStrided, inputs, outputs,
              AsStridedAttrs{self.sizes(), self.strides(), self.storage_offset()});
  }
};

// Installed when this file is linked in: the static library is linked whole (see meson.build).
Seam g_seam;
[[maybe_unused]] const bool g_installed = [] {
  set_autograd_seam(&g_seam);
  return true;
}();

}  // namespace

}  // namespace memgrad::autograd
