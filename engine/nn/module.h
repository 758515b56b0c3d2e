// Module: the base of every layer. It owns named parameters (leaves that require grad), named
// buffers (state that is saved but not trained) and named child modules, found recursively with
// dotted names ("blocks.0.attn.qkv.weight") exactly as PyTorch names them.
//
// Memory: a module's parameter bytes are allocated when it is constructed (LazyLinear: at its
// first forward). zero_grad(set_to_none = true) frees the gradient tensors; zero_grad(false)
// keeps them and fills them with zeros.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace memgrad::nn {

// Named tensors in registration order (parameters, then buffers, recursively).
using StateDict = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  // "Linear", "Sequential", ... for printing and messages.
  virtual std::string name() const = 0;

  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  // Number of parameter elements (counting each tensor once).
  int64_t num_parameters() const;
  // Bytes of parameter storage as allocated (rounded like the allocator rounds).
  size_t parameter_nbytes() const;

  // train() enables dropout; eval() disables it. Recursive.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves (or converts) every parameter, its gradient if any, and every buffer in place: the
  // Tensor handles users hold keep pointing at them. Allocates: the converted copies (the old
  // storage is freed when unused).
  Module& to(Device device);
  Module& to(DType dtype);

  // Frees every gradient (set_to_none) or fills it with zeros.
  void zero_grad(bool set_to_none = true);

  // Parameters and buffers by dotted name. The tensors alias the module's (no copy).
  StateDict state_dict() const;
  // Copies values in. strict: every key must match both ways. Shapes must match. Throws
  // CheckpointError listing the missing and unexpected keys and every shape mismatch, before
  // copying anything: a failed load leaves the module as it was.
  void load_state_dict(const StateDict& state, bool strict = true);
  // What load_state_dict would copy, as (parameter or buffer, value) pairs, or the
  // CheckpointError it would throw. Changes nothing.
  std::vector<std::pair<Tensor, Tensor>> check_state_dict(const StateDict& state,
                                                          bool strict = true) const;

  // One line per module, indented: "Sequential(\n  (0): Linear(in=784, out=512)\n ...)".
  std::string str() const;

  // The module's dotted path from the outermost module it is registered in ("blocks.3.attn";
  // "" for that one), kept as its children are registered and as it is registered itself. Its
  // forward, and autograd's nodes recorded there, run under it in the allocator trace
  // (TraceContext::module), and its parameters and buffers are named with it (TraceName).
  const char* trace_path() const { return trace_path_; }

 protected:
  // Registers a parameter (made a leaf that requires grad). Returns the stored handle.
  Tensor& register_parameter(const std::string& name, Tensor value);
  Tensor& register_buffer(const std::string& name, Tensor value);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    children_.emplace_back(name, module);
    adopt(name, *module);
    return module;
  }
  // Renames this module's subtree under `path` and names its tensors in their traces again.
  void set_trace_path(std::string_view path);
  // The text inside the parentheses of str(): "in=784, out=512".
  virtual std::string extra_repr() const { return ""; }

 private:
  void collect(const std::string& prefix, bool params, bool recurse,
               std::vector<std::pair<std::string, Tensor>>& out) const;
  std::string str(int indent) const;
  void adopt(const std::string& name, Module& child) const;
  // Tells each parameter's and buffer's storage its module, and the trace what the block is.
  void name_tensors() const;

  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  const char* trace_path_ = "";
  bool training_ = true;
};

// A module that maps one tensor to one tensor (every layer here); what Sequential chains.
//
// Calling the module (operator()) runs its forward between its forward hooks, as PyTorch's
// Module.__call__ does; calling forward() directly skips them (as in PyTorch). Containers call
// their children through operator(), so hooks registered on a child run inside the parent's
// forward: that is how sharded data parallelism gathers a layer's parameters just before the
// layer runs and frees them right after.
class UnaryModule : public Module {
 public:
  // Runs before forward with the input (PyTorch's register_forward_pre_hook).
  using ForwardPreHook = std::function<void(UnaryModule& module, const Tensor& input)>;
  // Runs after forward with the input and the output (PyTorch's register_forward_hook).
  using ForwardHook =
      std::function<void(UnaryModule& module, const Tensor& input, const Tensor& output)>;

  virtual Tensor forward(const Tensor& x) = 0;
  // The pre-hooks, forward, then the hooks, each in registration order. Allocates what they do.
  Tensor operator()(const Tensor& x);

  // Register a hook; the returned id removes it (remove_forward_hook). Allocate nothing.
  uint64_t register_forward_pre_hook(ForwardPreHook hook);
  uint64_t register_forward_hook(ForwardHook hook);
  // Removes the hook with this id (a pre-hook or a hook); unknown ids are ignored.
  void remove_forward_hook(uint64_t id);

 private:
  std::vector<std::pair<uint64_t, ForwardPreHook>> pre_hooks_;
  std::vector<std::pair<uint64_t, ForwardHook>> hooks_;
  uint64_t next_hook_id_ = 1;
};

}  // namespace memgrad::nn
