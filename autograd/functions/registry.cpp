// The OpKind table, filled once on first use, and the one path that records an op.
#include "autograd/functions/registry.h"

#include <array>

#include <fmt/format.h>

#include "autograd/error.h"
#include "autograd/graph.h"

namespace memgrad::autograd {
namespace {

using Table = std::array<OpEntry, kNumOpKinds>;

Table& mutable_table() {
  static Table table;
  return table;
}

const Table& table() {
  static const bool filled = [] {
    register_elementwise_ops();
    register_copy_ops();
    register_view_ops();
    register_reduce_ops();
    register_linalg_ops();
    register_indexing_ops();
    register_nn_ops();
    return true;
  }();
  (void)filled;
  return mutable_table();
}

}  // namespace

void set_op_entry(OpKind kind, OpEntry entry) {
  mutable_table()[static_cast<size_t>(kind)] = entry;
}

const OpEntry& op_entry(OpKind kind) { return table()[static_cast<size_t>(kind)]; }

std::shared_ptr<OpNode> record_op(OpKind kind, Inputs inputs, Outputs outputs,
                                  const OpAttrs& attrs) {
  const OpEntry& entry = op_entry(kind);
  if (entry.backward == nullptr) {
    throw AutogradError(
        fmt::format("[{}] this op has no backward formula in memgrad; compute "
                    "it under NoGradGuard or on detached inputs",
                    op_name(kind)));
  }
  const Outputs with_history =
      entry.differentiable_outputs == 0 ? outputs : outputs.first(entry.differentiable_outputs);
  std::shared_ptr<OpNode> node = make_op_node(kind, entry.backward, inputs, with_history, attrs);
  entry.save(*node, inputs, outputs);
  return node;
}

}  // namespace memgrad::autograd
