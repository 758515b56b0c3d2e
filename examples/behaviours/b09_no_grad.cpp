// B9 -- no_grad for inference saves memory (seeds 001 §3 and 003 §1).
//
// The same Sequential of Linear + ReLU layers runs the same batch twice: in grad mode, where
// every layer's ReLU output is saved for backward, and under NoGradGuard, where nothing is saved
// and each module's input is freed as soon as the module has returned its output. The peak and the
// kept bytes of both runs are read from the device allocator; the difference is exactly the saved
// hidden activations. What no_grad avoids is keeping activations, not storing gradients: no
// gradient exists during a forward pass in either mode.
//
//   ./memgrad example b09 [--size N] [--device sim:0] [--layers N]
#include "examples/behaviours/b09_no_grad.h"

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

// Peak and kept bytes of one forward; the output is returned through `out`.
ForwardMemory forward_memory(nn::Sequential& model, const Tensor& x, Device device, Tensor& out) {
  const int64_t base = allocated_on(device);
  reset_peak_memory_stats(device);
  out = model.forward(x);
  return {static_cast<int64_t>(max_memory_allocated(device)) - base, allocated_on(device) - base};
}

}  // namespace

NoGradResult measure_no_grad(int64_t size, Device device, int64_t layers) {
  NoGradResult r;
  r.layers = layers;
  r.batch = 64 * size;
  r.width = kWidth;
  r.activation_bytes = rounded(r.batch * kWidth * 4);
  manual_seed(0);
  nn::Sequential model;  // runs one module at a time, dropping each input as it goes
  for (int64_t i = 0; i < layers; ++i) {
    model.push_back(
        std::make_shared<nn::Linear>(kWidth, kWidth, nn::LinearOptions{true, device, kFloat32}));
    model.push_back(std::make_shared<nn::ReLU>());
  }
  const Tensor x = randn({r.batch, kWidth}, TensorOptions(kFloat32).with_device(device));
  Tensor with_grad, without_grad;
  r.grad_mode = forward_memory(model, x, device, with_grad);
  with_grad = with_grad.detach().clone();  // frees the graph; keeps the values to compare
  {
    NoGradGuard no_grad;
    r.no_grad = forward_memory(model, x, device, without_grad);
  }
  r.same_output = equal(with_grad, without_grad);
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B9", "no_grad for inference saves memory", "seeds 001 (section 3) and 003 (section 1)",
    "Wrapping inference in torch.no_grad() turns off autograd's tracking, which lowers the memory "
    "a forward pass needs; 003 attributes the saving to not storing gradients."};

int64_t layers_flag = 6;

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const bool workspace_ok = take_cublas_workspace(device);
  const NoGradResult r = measure_no_grad(flags.size, device, layers_flag);
  const int64_t act = r.activation_bytes, n = r.layers;
  fmt::print(
      "{} x (Linear({w}, {w}) + ReLU) on a float32 ({}, {w}) batch on {}; one activation "
      "= {} B.\n\n",
      n, r.batch, device.str(), with_commas(act), fmt::arg("w", r.width));
  MemoryReport report("Bytes above parameters and input during one forward pass:");
  report.add("grad mode: peak (n kept + the last Linear's output)", (n + 1) * act,
             r.grad_mode.peak);
  report.add("grad mode: kept after forward (n activations)", n * act, r.grad_mode.kept);
  report.add("no_grad:   peak (a module's input and output)", 2 * act, r.no_grad.peak);
  report.add("no_grad:   kept after forward (the output only)", act, r.no_grad.kept);
  report.add("difference of the peaks = n - 1 saved hidden activations", (n - 1) * act,
             r.grad_mode.peak - r.no_grad.peak);
  report.print();
  fmt::print("\nboth forwards computed the same output: {}\n", r.same_output ? "yes" : "no");
  print_conclusion(fmt::format(
      "no_grad cut the peak from {} B to {} B; the {} B difference is {} {} hidden activations "
      "that grad mode saves for backward. No gradient is stored by a forward pass in either "
      "mode, so what no_grad saves is the saved activations (the graph), not gradients.",
      with_commas(r.grad_mode.peak), with_commas(r.no_grad.peak),
      with_commas(r.grad_mode.peak - r.no_grad.peak),
      r.grad_mode.peak - r.no_grad.peak == (n - 1) * act ? "exactly the" : "NOT the", n - 1));
  return workspace_ok && report.all_match() && r.same_output ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b09_no_grad_main() is its main() (a generated file calls it).
int b09_no_grad_main(int argc, char** argv) {
  ExtraFlags extra;
  extra.integer("--layers", layers_flag, "Number of Linear + ReLU layers", 2, 64);
  return run_behaviour(argc, argv, kInfo, body, extra);
}

}  // namespace memgrad::examples
