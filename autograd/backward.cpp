// The backward runner: dependency counts, a ready queue (AccumulateGrad first, then by creation),
// input buffers.
#include "autograd/backward.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "allocator/trace.h"
#include "autograd/accumulate_grad.h"
#include "autograd/error.h"
#include "autograd/grad_mode.h"
#include "autograd/graph.h"
#include "engine/factories.h"

namespace memgrad::autograd {
namespace {

struct Capture {
  std::vector<Edge> targets;      // the inputs of autograd::grad, as edges
  std::vector<Tensor> gradients;  // what arrived at each
};

// Adds g into a node input buffer slot: in place when the slot's tensor is ours alone.
void accumulate(Tensor& slot, Tensor g) {
  if (!slot.defined()) {
    slot = std::move(g);
  } else if (slot.impl_ptr().use_count() == 1 && slot.impl()->storage_ptr().use_count() == 1 &&
             slot.dtype() == g.dtype() && slot.sizes() == g.sizes()) {
    slot.add_(g);
  } else {
    slot = slot + g;
  }
}

// Checks a gradient against what the receiving input expects; converts its dtype if needed.
Tensor validate(const Node& producer, size_t index, Tensor g, const TensorMeta& expected) {
  if (!(g.sizes() == expected.sizes)) {
    throw AutogradError(
        fmt::format("Function {} returned an invalid gradient at index {} - got "
                    "{} but expected shape compatible with {}",
                    producer.name(), index, to_string(g.sizes()), to_string(expected.sizes)));
  }
  if (g.dtype() != expected.dtype) g = g.to(expected.dtype);
  if (g.device() != expected.device) g = g.to(expected.device);
  return g;
}

struct ByCreation {
  bool operator()(const Node* a, const Node* b) const {
    return a->sequence_nr() < b->sequence_nr();
  }
};

void execute(const std::vector<Edge>& roots, std::vector<Tensor> root_grads, bool keep_graph,
             Capture* capture) {
  // Dependencies: how many edges from reachable nodes point at each node.
  std::unordered_map<Node*, int> deps;
  std::vector<std::shared_ptr<Node>> keep_alive;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const Edge& r : roots) {
    if (seen.insert(r.fn.get()).second) {
      stack.push_back(r.fn.get());
      keep_alive.push_back(r.fn);
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.valid()) continue;
      ++deps[e.fn.get()];
      if (seen.insert(e.fn.get()).second) {
        stack.push_back(e.fn.get());
        keep_alive.push_back(e.fn);
      }
    }
  }

  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::priority_queue<Node*, std::vector<Node*>, ByCreation> ready;
  auto slot = [&](Node* n, uint32_t nr) -> Tensor& {
    std::vector<Tensor>& b = buffers[n];
    if (b.size() <= nr) b.resize(std::max<size_t>(nr + 1, n->output_meta().size()));
    return b[nr];
  };
  for (size_t i = 0; i < roots.size(); ++i) {
    accumulate(slot(roots[i].fn.get(), roots[i].input_nr), std::move(root_grads[i]));
  }
  std::unordered_set<Node*> queued;
  for (const Edge& r : roots) {
    if (deps[r.fn.get()] == 0 && queued.insert(r.fn.get()).second) ready.push(r.fn.get());
  }

  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    const TraceModuleScope module(n->module());
    std::vector<Tensor> grads = std::move(buffers[n]);
    buffers.erase(n);
    grads.resize(std::max(grads.size(), n->output_meta().size()));
    for (auto& [nr, hook] : n->output_hooks()) {
      if (nr < grads.size() && grads[nr].defined()) {
        Tensor replaced = hook(grads[nr]);
        if (replaced.defined()) grads[nr] = std::move(replaced);
      }
    }
    const bool is_leaf_node = dynamic_cast<AccumulateGrad*>(n) != nullptr;
    if (capture != nullptr) {
      for (size_t i = 0; i < capture->targets.size(); ++i) {
        const Edge& t = capture->targets[i];
        if (t.fn.get() == n && t.input_nr < grads.size()) capture->gradients[i] = grads[t.input_nr];
      }
      if (is_leaf_node) continue;  // autograd::grad never accumulates into .grad
    }
    bool any = false;
    for (const Tensor& g : grads) any = any || g.defined();
    std::vector<Tensor> input_grads;
    if (any) input_grads = n->apply(std::move(grads));
    if (!keep_graph) n->release_saved();
    const EdgeList& edges = n->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid()) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        Tensor g = validate(*n, i, std::move(input_grads[i]), e.fn->output_meta()[e.input_nr]);
        accumulate(slot(e.fn.get(), e.input_nr), std::move(g));
      }
      if (--deps[e.fn.get()] == 0 && queued.insert(e.fn.get()).second) ready.push(e.fn.get());
    }
  }
}

// The root edges and seed gradients for `outputs`.
void prepare_roots(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                   std::vector<Edge>& edges, std::vector<Tensor>& grads) {
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size()) {
    throw AutogradError(fmt::format("backward: got {} gradients for {} outputs",
                                    grad_outputs.size(), outputs.size()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    Edge e = gradient_edge(out);
    if (!e.valid()) {
      throw AutogradError(fmt::format(
          "element {} of tensors does not require grad and does not have a grad_fn", i));
    }
    Tensor g = i < grad_outputs.size() ? grad_outputs[i] : Tensor();
    if (!g.defined()) {
      if (out.numel() != 1) {
        throw AutogradError(
            fmt::format("grad can be implicitly created only for scalar outputs "
                        "(output {} has shape {})",
                        i, to_string(out.sizes())));
      }
      g = ones_like(out);
    } else if (!(g.sizes() == out.sizes())) {
      throw AutogradError(
          fmt::format("Mismatch in shape: grad_output[{}] has a shape of {} and "
                      "output[{}] has a shape of {}.",
                      i, to_string(g.sizes()), i, to_string(out.sizes())));
    }
    edges.push_back(std::move(e));
    grads.push_back(g.dtype() == out.dtype() ? g : g.to(out.dtype()));
  }
}

void check_create_graph(bool create_graph) {
  if (create_graph) {
    throw AutogradError("create_graph=True (higher-order gradients) is not supported by memgrad");
  }
}

}  // namespace

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
              bool retain_graph, bool create_graph) {
  check_create_graph(create_graph);
  TracePhaseScope phase("backward");
  NoGradGuard no_grad;
  std::vector<Edge> edges;
  std::vector<Tensor> grads;
  prepare_roots(outputs, grad_outputs, edges, grads);
  execute(edges, std::move(grads), retain_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool allow_unused) {
  TracePhaseScope phase("backward");
  NoGradGuard no_grad;
  std::vector<Edge> edges;
  std::vector<Tensor> grads;
  prepare_roots(outputs, grad_outputs, edges, grads);
  Capture capture;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge e = gradient_edge(inputs[i]);
    if (!e.valid()) {
      throw AutogradError(
          fmt::format("One of the differentiated Tensors (input {}) does not "
                      "require grad",
                      i));
    }
    capture.targets.push_back(std::move(e));
  }
  capture.gradients.resize(inputs.size());
  execute(edges, std::move(grads), retain_graph, &capture);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!capture.gradients[i].defined() && !allow_unused) {
      throw AutogradError(
          "One of the differentiated Tensors appears to not have been used in "
          "the graph. Set allow_unused=True if this is the desired behavior.");
    }
  }
  return capture.gradients;
}

}  // namespace memgrad::autograd
