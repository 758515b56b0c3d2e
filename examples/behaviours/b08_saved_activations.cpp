// B8 -- autograd keeps activations from forward to backward (seeds 001 §3 and 002).
//
// A stack of Linear + ReLU layers runs forward in grad mode and the device allocator's
// allocated bytes are read after every module. Each layer keeps exactly one activation: the
// ReLU saves its output for its own backward, and the next Linear saves that same tensor as its
// input, so the Linear's output is freed as soon as the ReLU has run. Backward releases each
// node's saved tensors as soon as the node has run (read through a gradient hook on every hidden
// activation), and after backward only the output, the loss and the new gradients remain.
// backward(retain_graph = true) keeps every saved activation; the next backward without it
// frees them, and a third backward finds them gone and raises PyTorch's error.
//
//   ./memgrad example b08 [--size N] [--device sim:0] [--layers N]
#include "examples/behaviours/b08_saved_activations.h"

#include <memory>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"

namespace memgrad::examples {
namespace {

constexpr int64_t kWidth = 256;

int64_t allocated_on(Device device) { return static_cast<int64_t>(memory_allocated(device)); }

using Layers = std::vector<std::shared_ptr<nn::Linear>>;

Layers make_layers(int64_t n, Device device) {
  Layers layers;
  for (int64_t i = 0; i < n; ++i) {
    layers.push_back(
        std::make_shared<nn::Linear>(kWidth, kWidth, nn::LinearOptions{true, device, kFloat32}));
  }
  return layers;
}

// Bytes of the gradient blocks that exist so far.
int64_t grad_blocks(const Layers& layers) {
  int64_t bytes = 0;
  for (const auto& layer : layers) {
    for (const Tensor& p : layer->parameters()) {
      if (p.grad().defined()) bytes += static_cast<int64_t>(p.grad().storage().allocated_nbytes());
    }
  }
  return bytes;
}

// relu(linear_n(... relu(linear_1(x)))), recorded when grad mode is on.
Tensor run_forward(const Layers& layers, const Tensor& x) {
  nn::ReLU relu;
  Tensor h = x;
  for (const auto& layer : layers) h = relu.forward(layer->forward(h));
  return h;
}

}  // namespace

namespace {

// The byte sizes every expectation is built from.
struct Sizes {
  int64_t act;          // one activation
  int64_t layer_grads;  // one layer's weight and bias gradients
  int64_t loss;         // a 0-d float32
};

// Forward module by module, a hook per hidden activation, backward.
void measure_forward_backward(SavedActivationsResult& r, const Layers& model, const Tensor& x,
                              Device device, const Sizes& z) {
  const int64_t base = allocated_on(device);
  auto above = [&] { return allocated_on(device) - base; };
  const int64_t n = r.layers;
  nn::ReLU relu;
  Tensor h = x;
  for (int64_t i = 1; i <= n; ++i) {
    h = model[static_cast<size_t>(i - 1)]->forward(h);
    r.forward.push_back(
        {fmt::format("after Linear {}: {} kept + its output", i, i - 1), i * z.act, above()});
    h = relu.forward(h);
    r.forward.push_back(
        {fmt::format("after ReLU {}: Linear output freed, {} kept", i, i), i * z.act, above()});
    if (i == n) break;
    // When this activation's gradient arrives, the nodes above it have run: what is left
    // besides the gradients of layers i+1..n (read from their blocks and taken off) is
    // activations 1..i, the output (held by h), the arriving gradient and the loss.
    const int64_t expected = (i + 2) * z.act + z.loss;
    autograd::register_hook(h, [&r, &above, &model, i, expected](const Tensor&) {
      r.backward.push_back(
          {fmt::format("gradient reaches ReLU {} output: {} saved + y + grad", i, i), expected,
           above() - grad_blocks(model)});
      return Tensor();
    });
  }
  const Tensor loss = h.sum();
  r.forward.push_back({"after loss = output.sum()", n * z.act + z.loss, above()});
  loss.backward();
  r.after_backward = {"after backward: output + loss + gradients", z.act + z.loss + r.grad_bytes,
                      above()};
}

// A fresh forward, backward(retain_graph = true), a second backward, a third that must fail.
// The gradients must not exist yet.
void measure_retain(SavedActivationsResult& r, const Layers& model, const Tensor& x, Device device,
                    const Sizes& z) {
  const int64_t base = allocated_on(device);
  auto above = [&] { return allocated_on(device) - base; };
  const Tensor out = run_forward(model, x);
  const Tensor loss = out.sum();
  loss.backward({}, /*retain_graph=*/true);
  r.retained = {"after backward(retain_graph=true): all kept + gradients",
                r.layers * z.act + z.loss + r.grad_bytes, above()};
  loss.backward();  // accumulates into the same gradients, and frees the graph
  r.second_backward_ran = true;
  r.after_second_backward = {"after a second backward (no retain_graph)",
                             z.act + z.loss + r.grad_bytes, above()};
  try {
    loss.backward();
  } catch (const Error& e) {
    r.third_backward_error = e.what();
  }
}

}  // namespace

SavedActivationsResult measure_saved_activations(int64_t size, Device device, int64_t layers) {
  SavedActivationsResult r;
  r.layers = layers;
  r.batch = 64 * size;
  r.width = kWidth;
  const Sizes z{rounded(r.batch * kWidth * 4), rounded(kWidth * kWidth * 4) + rounded(kWidth * 4),
                rounded(4)};
  r.activation_bytes = z.act;
  r.grad_bytes = layers * z.layer_grads;
  manual_seed(0);
  const Layers model = make_layers(layers, device);
  const Tensor x = randn({r.batch, kWidth}, TensorOptions(kFloat32).with_device(device));
  measure_forward_backward(r, model, x, device, z);
  for (const auto& layer : model) layer->zero_grad();  // frees the gradients
  measure_retain(r, model, x, device, z);
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B8", "autograd keeps activations for backward; backward frees them",
    "seeds 001 (section 3) and 002",
    "During the forward pass autograd holds on to intermediate results that the backward pass "
    "needs, so training uses much more memory than the forward alone; the graph built for "
    "backward references those tensors until backward runs."};

int64_t layers_flag = 6;

void add_rows(MemoryReport& report, const std::vector<ActivationStep>& steps) {
  for (const ActivationStep& s : steps) report.add(s.what, s.expected, s.measured);
}

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const bool workspace_ok = take_cublas_workspace(device);
  const SavedActivationsResult r = measure_saved_activations(flags.size, device, layers_flag);
  const int64_t act = r.activation_bytes;
  fmt::print(
      "{} x (Linear({w}, {w}) + ReLU) on a float32 ({}, {w}) batch on {}; one activation "
      "= {} x {} x 4 = {} B; loss = output.sum().\n\n",
      r.layers, r.batch, device.str(), r.batch, r.width, with_commas(act), fmt::arg("w", r.width));
  MemoryReport forward("Forward: allocated above parameters and input, after each module:");
  add_rows(forward, r.forward);
  forward.print();
  MemoryReport backward(
      "\nBackward: allocated minus the gradients accumulated so far, when each hidden "
      "activation's\ngradient arrives (a tensor hook); y = the output, still held:");
  add_rows(backward, r.backward);
  backward.add(r.after_backward.what, r.after_backward.expected, r.after_backward.measured);
  backward.print();
  MemoryReport retain("\nA fresh forward, then backward twice:");
  retain.add(r.retained.what, r.retained.expected, r.retained.measured);
  retain.add(r.after_second_backward.what, r.after_second_backward.expected,
             r.after_second_backward.measured);
  retain.print();
  fmt::print("\nthird backward (no retain_graph): {}\n",
             r.third_backward_error.empty() ? "no error (unexpected)" : r.third_backward_error);

  const ActivationStep& last = r.forward[r.forward.size() - 2];
  const bool ok = forward.all_match() && backward.all_match() && retain.all_match() &&
                  r.second_backward_ran && !r.third_backward_error.empty();
  print_conclusion(fmt::format(
      "every Linear + ReLU layer kept exactly one activation ({} B: the ReLU output, saved by the "
      "ReLU and by the next Linear), {} B after the forward; backward freed the {} hidden ones "
      "node "
      "by node ({} B), leaving the output, the loss and {} B of gradients; retain_graph kept all "
      "{} until the second backward, and the third backward {}.",
      with_commas(act), with_commas(last.measured), r.layers - 1,
      with_commas(r.forward.back().measured - r.after_backward.measured + r.grad_bytes),
      with_commas(r.grad_bytes), r.layers,
      r.third_backward_error.empty() ? "did not fail" : "failed because they were freed"));
  return workspace_ok && ok ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b08_saved_activations_main() is its main() (a generated file calls it).
int b08_saved_activations_main(int argc, char** argv) {
  ExtraFlags extra;
  extra.integer("--layers", layers_flag, "Number of Linear + ReLU layers", 2, 64);
  return run_behaviour(argc, argv, kInfo, body, extra);
}

}  // namespace memgrad::examples
