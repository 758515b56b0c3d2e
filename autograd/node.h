// Node: one recorded op in the graph (a grad_fn), and OpNode, the node of every engine op.
//
// A node has one edge per input of the op it records, pointing at the node that will receive
// that input's gradient (the input's own grad_fn, or the AccumulateGrad of a leaf); an empty
// edge means the input needs no gradient. apply() turns the gradients of the op's outputs into
// gradients of its inputs. Saved tensors are the node's memory cost: release_saved() drops them
// as soon as the node has run, which is how backward frees activations progressively.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "allocator/error.h"
#include "autograd/autograd_meta.h"
#include "autograd/saved_tensor.h"
#include "base/object_pool.h"
#include "engine/autograd_seam.h"
#include "engine/op_kind.h"

namespace memgrad::autograd {

class Node;

// Where a gradient goes: input slot `input_nr` of node `fn` (null: nowhere).
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

// What a gradient for one input (or output) must look like, and the tensor's geometry in its
// storage (as_strided backward needs it; no tensor is kept alive for it).
struct TensorMeta {
  TensorMeta() = default;
  // t's; a node's lists construct it in place (emplace_back(t)): no copy of its two shapes.
  explicit TensorMeta(const Tensor& t)
      : sizes(t.sizes()),
        strides(t.strides()),
        storage_offset(t.storage_offset()),
        dtype(t.dtype()),
        device(t.device()) {}

  Shape sizes;
  Shape strides;
  int64_t storage_offset = 0;
  DType dtype = DType::Float32;
  Device device;
};

// A node's lists live in pooled memory (base/object_pool.h), as the node itself does: every op
// recorded for backward makes them and every graph freed destroys them.
using EdgeList = std::vector<Edge, PoolAllocator<Edge>>;
using MetaList = std::vector<TensorMeta, PoolAllocator<TensorMeta>>;

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Gradients of the inputs (one per edge; undefined where no gradient flows) from the
  // gradients of the outputs (undefined entries stand for zeros).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) = 0;
  // Drops the saved tensors.
  virtual void release_saved() {}
  // "MulBackward", "AccumulateGrad", ...
  virtual std::string name() const = 0;

  EdgeList& next_edges() { return next_edges_; }
  const EdgeList& next_edges() const { return next_edges_; }
  // Creation order; backward runs later nodes first among the ready ones (as PyTorch).
  // AccumulateGrad's is kLeafSequenceNr, larger than any op's: a leaf's gradient is written
  // as soon as it is ready, however long ago its node was made.
  uint64_t sequence_nr() const { return sequence_nr_; }
  static constexpr uint64_t kLeafSequenceNr = UINT64_MAX;
  // Metadata of each output, so a missing output gradient can be materialised as zeros.
  MetaList& output_meta() { return output_meta_; }
  // Hooks on the gradient of output `output_nr` (tensor hooks and retain_grad of non-leaves).
  std::vector<std::pair<uint32_t, GradHook>>& output_hooks() { return output_hooks_; }
  // The module whose forward recorded the node (the trace context's at creation; for a leaf's
  // AccumulateGrad, its parameter's module): backward runs the node under it.
  const char* module() const { return module_; }

 protected:
  // A node that runs before every op node once ready (AccumulateGrad).
  explicit Node(uint64_t sequence_nr);
  void set_module(const char* module) { module_ = module; }

 private:
  uint64_t sequence_nr_;
  const char* module_;
  EdgeList next_edges_;
  MetaList output_meta_;
  std::vector<std::pair<uint32_t, GradHook>> output_hooks_;
};

// The node of an engine op: the op's kind and attributes, its saved tensors, the metadata of its
// inputs, and the formula that computes its backward.
//
// Saved tensors live in named slots: each op declares an enum of what it saves
// (`enum Saved { kSelf, kOther }`) and calls save(kSelf, x) in its recorder and unpack(kSelf) in
// its formula. A slot that was never filled (the op saves a tensor only when another input needs
// a gradient) unpacks as an undefined tensor.
class OpNode final : public Node {
 public:
  using Formula = std::vector<Tensor> (*)(OpNode& node, const std::vector<Tensor>& grad_outputs);

  OpNode(OpKind kind, Formula formula, const OpAttrs& attrs);

  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  void release_saved() override;
  std::string name() const override;

  // Saves `t` (an input of the op, or an input's value) in `slot` for backward.
  template <class Slot>
  requires std::is_enum_v<Slot>
  void save(Slot slot, const Tensor& t) {
    save_at(static_cast<size_t>(slot), t, /*is_output=*/false);
  }
  // Saves the op's own output `t` in `slot` (kept without its history, which is this node: a
  // reference cycle otherwise).
  template <class Slot>
  requires std::is_enum_v<Slot>
  void save_output(Slot slot, const Tensor& t) {
    save_at(static_cast<size_t>(slot), t, /*is_output=*/true);
  }
  // The tensor saved in `slot`, checked against in-place modification and release; undefined
  // when nothing was saved there.
  template <class Slot>
  requires std::is_enum_v<Slot> Tensor unpack(Slot slot) {
    return unpack_at(static_cast<size_t>(slot));
  }

  // Whether input `i` needs a gradient (its edge is valid).
  bool needs_grad(size_t i) const { return i < next_edges().size() && next_edges()[i].valid(); }

  OpKind kind() const { return kind_; }
  // The op's attributes as the struct its kind carries (op_kind.h); InternalError for another.
  template <class Attrs>
  const Attrs& attrs() const {
    const Attrs* a = std::get_if<Attrs>(&attrs_);
    internal_check(a != nullptr, "an op node read attributes of another op family");
    return *a;
  }
  MetaList& input_meta() { return input_meta_; }
  const TensorMeta& input(size_t i) const { return input_meta_[i]; }

 private:
  void save_at(size_t slot, const Tensor& t, bool is_output);
  Tensor unpack_at(size_t slot);

  OpKind kind_;
  Formula formula_;
  OpAttrs attrs_;
  std::vector<SavedTensor, PoolAllocator<SavedTensor>> saved_;  // indexed by the op's Saved slots
  MetaList input_meta_;
};

// "Mul" -> the node name "MulBackward" (scalar variants share their op's name).
std::string backward_name(OpKind kind);

}  // namespace memgrad::autograd
