// The narrow interface through which the engine reaches differentiation (and autocast).
//
// The engine runs every op; it never builds a graph. After (or, for in-place ops, around) the
// kernel, a front-end op tells the seam what ran: the OpKind, the inputs, the outputs and the
// op family's attributes (engine/op_attrs.h). autograd/ implements the seam: it decides
// what each op saves and owns the backward formulas. Autocast plugs in before the kernel and may
// replace the inputs with casts. The engine includes no autograd header; autograd installs its
// implementation with set_autograd_seam() when it is linked in.
//
// Cost when nothing requires grad: one thread-local load and one flag per input.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/op_attrs.h"
#include "engine/op_kind.h"

namespace memgrad {

class Tensor;
struct AutogradMeta;

class AutogradSeam {
 public:
  virtual ~AutogradSeam() = default;

  // Records an out-of-place op whose inputs include one that requires grad (grad mode on).
  virtual void record(OpKind kind, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                      const OpAttrs& attrs) = 0;

  // In-place ops, in two steps around the kernel. begin_inplace runs the checks (leaf that
  // requires grad, views of one) and saves what backward needs of the values about to be
  // overwritten; it returns a handle (null when nothing is recorded). finish_inplace saves what
  // backward needs of the result and rebases the history of `self` (and of its base if `self`
  // is a view) onto the new node.
  virtual std::shared_ptr<void> begin_inplace(OpKind kind, const Tensor& self,
                                              std::span<const Tensor> others,
                                              const OpAttrs& attrs) = 0;
  virtual void finish_inplace(const std::shared_ptr<void>& pending, const Tensor& self) = 0;
  // Throws if writing into `out` of an `out=` call would break autograd.
  virtual void check_out(const Tensor& out, const char* op) = 0;

  // The autograd half of Tensor's API (see tensor.h for each one's contract).
  virtual void set_requires_grad(const Tensor& t, bool requires_grad) = 0;
  virtual bool is_leaf(const Tensor& t) = 0;
  virtual Tensor grad(const Tensor& t) = 0;
  virtual void set_grad(const Tensor& t, const Tensor& grad) = 0;
  virtual std::string grad_fn_name(const Tensor& t) = 0;
  virtual void retain_grad(const Tensor& t) = 0;
  virtual bool retains_grad(const Tensor& t) = 0;
  virtual void register_hook(const Tensor& t, std::function<Tensor(const Tensor&)> hook) = 0;
  virtual void register_post_accumulate_grad_hook(const Tensor& t,
                                                  std::function<void(const Tensor&)> hook) = 0;
  virtual void backward(const Tensor& t, const Tensor& gradient, bool retain_graph,
                        bool create_graph) = 0;
  virtual void detach_(const Tensor& t) = 0;
  virtual void destroy_meta(AutogradMeta* meta) = 0;

  // Autocast: called before a kernel when an autocast region is active. May replace `inputs`
  // with casts (kept alive in `inputs`). Returns whether it changed anything.
  virtual bool autocast_inputs(OpKind kind, std::vector<Tensor>& inputs) = 0;
};

// The installed seam, or null when autograd is not linked.
AutogradSeam* autograd_seam();
void set_autograd_seam(AutogradSeam* seam);

// Grad mode (thread-local, on by default). Users' guards live in autograd/grad_mode.h.
bool grad_mode_enabled();
void set_grad_mode_enabled(bool enabled);

// Sets grad mode for its scope and restores the previous mode when the scope ends, exceptions
// included: the one way engine code turns recording off (an OOM caught inside an op must not
// leave grad mode off for the retry). autograd's NoGradGuard and EnableGradGuard are this guard.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(grad_mode_enabled()) {
    set_grad_mode_enabled(enabled);
  }
  ~GradModeGuard() { set_grad_mode_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

// Autocast mode (thread-local, off by default). Guards live in autograd/autocast.h.
bool autocast_enabled();
void set_autocast_enabled(bool enabled);

}  // namespace memgrad
