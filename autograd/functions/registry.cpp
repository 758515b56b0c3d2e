// The OpKind table, filled once on first use.
#include "autograd/functions/registry.h"

#include <array>

namespace memgrad::autograd {
namespace {

using Table = std::array<OpEntry, static_cast<size_t>(OpKind::NumOpKinds)>;

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

void set_op_entry(OpKind kind, OpEntry entry) { mutable_table()[static_cast<size_t>(kind)] = entry; }

const OpEntry& op_entry(OpKind kind) { return table()[static_cast<size_t>(kind)]; }

OpNode::Formula formula_for(OpKind kind) { return op_entry(kind).formula; }

}  // namespace memgrad::autograd
