// Graph construction helpers.
#include "autograd/graph.h"

#include "autograd/accumulate_grad.h"
#include "autograd/functions/registry.h"
#include "base/object_pool.h"

namespace memgrad::autograd {

AutogradMeta& meta_of(const Tensor& t) {
  AutogradMeta* meta = t.impl()->autograd_meta();
  if (meta == nullptr) {
    meta = pool_new<AutogradMeta>();
    t.impl()->set_autograd_meta(meta);
  }
  return *meta;
}

Tensor view_base_of(const Tensor& t) { return t.is_view() ? Tensor(t.impl()->view_base()) : t; }

namespace {

// A view's grad_fn is stale when its storage changed in place through another alias after the
// grad_fn was set: it is rebuilt as an as_strided view of the base's current history.
void refresh_view_history(const Tensor& t, AutogradMeta& meta) {
  if (!t.is_view() || meta.view_version == t.version()) return;
  const Tensor base = view_base_of(t);
  if (!base.requires_grad()) return;
  const Tensor inputs[] = {base};
  const Tensor outputs[] = {t};
  record_op(OpKind::AsStrided, inputs, outputs,
            AsStridedAttrs{t.sizes(), t.strides(), t.storage_offset()});
}

}  // namespace

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  AutogradMeta& meta = meta_of(t);
  if (meta.grad_fn) {
    refresh_view_history(t, meta);
    return {meta.grad_fn, meta.output_nr};
  }
  std::shared_ptr<Node> acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = make_pooled<AccumulateGrad>(t);
    meta.grad_accumulator = acc;
  }
  return {acc, 0};
}

Tensor alias_with_history(const Tensor& t, const Edge& edge) {
  Tensor alias = t.detach();
  if (edge.valid()) {
    AutogradMeta& meta = meta_of(alias);
    meta.grad_fn = edge.fn;
    meta.output_nr = edge.input_nr;
    alias.impl()->set_requires_grad_flag(true);
  }
  return alias;
}

void set_history(const Tensor& t, uint32_t output_nr, const std::shared_ptr<Node>& fn) {
  AutogradMeta& meta = meta_of(t);
  meta.grad_fn = fn;
  meta.output_nr = output_nr;
  meta.leaf_requires_grad = false;
  meta.view_version = t.version();
  t.impl()->set_requires_grad_flag(true);
}

std::shared_ptr<OpNode> make_op_node(OpKind kind, OpNode::Formula formula,
                                     std::span<const Tensor> inputs,
                                     std::span<const Tensor> outputs, const OpAttrs& attrs) {
  auto node = make_pooled<OpNode>(kind, formula, attrs);
  node->next_edges().reserve(inputs.size());
  node->input_meta().reserve(inputs.size());
  node->output_meta().reserve(outputs.size());
  for (const Tensor& in : inputs) {
    node->next_edges().push_back(gradient_edge(in));
    if (in.defined()) {
      node->input_meta().emplace_back(in);
    } else {
      node->input_meta().emplace_back();
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    node->output_meta().emplace_back(outputs[i]);
    // Integer outputs (indices) never require grad, as in PyTorch.
    if (is_floating(outputs[i].dtype())) set_history(outputs[i], static_cast<uint32_t>(i), node);
  }
  return node;
}

}  // namespace memgrad::autograd
