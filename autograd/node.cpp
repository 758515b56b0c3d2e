// Node bookkeeping and OpNode's saved tensors.
#include "autograd/node.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "allocator/trace.h"
#include "autograd/hooks.h"

namespace memgrad::autograd {
namespace {

// The saved slots a node makes room for at its first save (most ops save two or three).
constexpr size_t kSavedSlotsReserved = 3;

std::atomic<uint64_t> g_next_sequence_nr{0};

}  // namespace

Node::Node() : Node(g_next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

Node::Node(uint64_t sequence_nr)
    : sequence_nr_(sequence_nr), module_(current_trace_context().module) {}

OpNode::OpNode(OpKind kind, Formula formula, const OpAttrs& attrs)
    : kind_(kind), formula_(formula), attrs_(attrs) {}

std::vector<Tensor> OpNode::apply(std::vector<Tensor>&& grad_outputs) {
  return formula_(*this, grad_outputs);
}

void OpNode::release_saved() {
  for (SavedTensor& s : saved_) s.release();
}

std::string OpNode::name() const { return backward_name(kind_); }

void OpNode::save_at(size_t slot, const Tensor& t, bool is_output) {
  // Ops save their slots in order: room for a few at the first, so the next ones do not move it.
  if (saved_.capacity() <= slot) saved_.reserve(std::max<size_t>(slot + 1, kSavedSlotsReserved));
  if (saved_.size() <= slot) saved_.resize(slot + 1);
  saved_[slot] = SavedTensor(t, is_output, current_saved_tensor_hooks());
}

Tensor OpNode::unpack_at(size_t slot) {
  return slot < saved_.size() ? saved_[slot].unpack(*this) : Tensor();
}

std::string backward_name(OpKind kind) {
  // PascalCase of the op's name: "log_softmax" -> "LogSoftmaxBackward".
  const std::string op = op_name(kind);
  std::string out;
  bool upper = true;
  for (char c : op) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out + "Backward";
}

}  // namespace memgrad::autograd
