// B15 -- lazy parameter initialisation (seed 002, example 1).
//
// A model of LazyLinear layers is built and measured before its first forward (no parameter
// bytes, no parameters), during it (each layer allocates exactly its rounded weight and bias
// bytes), and after it (a second forward adds nothing). The article's own LazyLinear sets
// `self.bias = None` right after storing the flag, so its later test `self.bias is not None and
// self.bias is None` is never true and its layer has no bias at all; memgrad's LazyLinear
// creates the bias, and the program shows its bytes and its name.
//
//   ./memgrad example b15 [--size N] [--device sim:0]
#include "examples/behaviours/b15_lazy_init.h"

#include <algorithm>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/autograd.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"

namespace memgrad::examples {
namespace {

int64_t allocated_on(Device device) { return static_cast<int64_t>(memory_allocated(device)); }

// Rounded bytes of a float32 (out x in) weight and its (out) bias.
int64_t linear_bytes(int64_t in, int64_t out, bool bias) {
  return rounded(out * in * 4) + (bias ? rounded(out * 4) : 0);
}

bool has_name(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

LazyInitResult measure_lazy_init(int64_t size, Device device) {
  LazyInitResult r;
  r.in_features = 256;
  r.hidden = 128 * size;
  r.classes = 10;
  r.batch = 32;
  const nn::LinearOptions options{true, device, kFloat32};
  const Tensor x = randn({r.batch, r.in_features}, TensorOptions(kFloat32).with_device(device));

  int64_t before = allocated_on(device);
  nn::Sequential model(
      {std::make_shared<nn::LazyLinear>(r.hidden, options), std::make_shared<nn::ReLU>(),
       std::make_shared<nn::LazyLinear>(r.hidden, options), std::make_shared<nn::ReLU>(),
       std::make_shared<nn::LazyLinear>(r.classes, options)});
  r.construction_bytes = allocated_on(device) - before;
  r.parameters_before = model.parameters().size();

  // The first forward, layer by layer as Sequential runs it; no-grad mode so that nothing is
  // saved for backward and each layer keeps only its parameters (its output is subtracted).
  NoGradGuard no_grad;
  before = allocated_on(device);
  Tensor h = x;
  int64_t in = r.in_features;
  for (size_t i = 0; i < model.size(); ++i) {
    const int64_t layer_before = allocated_on(device);
    const Tensor y = model[i]->forward(h);
    const int64_t kept = allocated_on(device) - layer_before - rounded(y.nbytes());
    if (model[i]->name() == "LazyLinear") {
      const int64_t out = y.size(-1);
      r.layers.push_back({fmt::format("{}: LazyLinear({} -> {})", i, in, out),
                          linear_bytes(in, out, true), kept, false});
      r.expected_parameter_bytes += linear_bytes(in, out, true);
      in = out;
    }
    h = y;
  }
  h = Tensor();
  r.first_forward_bytes = allocated_on(device) - before;
  for (const auto& [name, p] : model.named_parameters()) {
    r.parameter_names.push_back(name);
  }
  for (LazyLayerRow& row : r.layers) {
    row.has_bias = has_name(r.parameter_names, row.name.substr(0, row.name.find(':')) + ".bias");
  }
  before = allocated_on(device);
  model.forward(x);
  r.second_forward_bytes = allocated_on(device) - before;

  before = allocated_on(device);
  {
    const nn::Linear eager(r.in_features, r.hidden, options);
    r.eager_construction_bytes = allocated_on(device) - before;
  }
  r.eager_expected = linear_bytes(r.in_features, r.hidden, true);
  nn::LazyLinear weight_only(r.hidden, {false, device, kFloat32});
  before = allocated_on(device);
  weight_only.forward(x);
  r.weight_only_bytes = allocated_on(device) - before;
  r.weight_only_expected = linear_bytes(r.in_features, r.hidden, false);
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B15", "lazy parameter initialisation", "seed 002 (example 1)",
    "A layer that creates its weight and bias only at its first forward keeps the model's "
    "parameter memory at zero until then, at the price of a little work on that first call."};

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const bool workspace_ok = take_cublas_workspace(device);
  const LazyInitResult r = measure_lazy_init(flags.size, device);
  MemoryReport report(fmt::format(
      "LazyLinear({0}) -> ReLU -> LazyLinear({0}) -> ReLU -> LazyLinear({1}) on {2}, float32, "
      "first input ({3}, {4}):",
      r.hidden, r.classes, device.str(), r.batch, r.in_features));
  report.add(fmt::format("construction ({} parameter tensors)", r.parameters_before), 0,
             r.construction_bytes);
  for (const LazyLayerRow& row : r.layers) {
    report.add(fmt::format("first forward, {} weight + bias", row.name), row.expected,
               row.measured);
  }
  report.add("first forward, whole model (output released)", r.expected_parameter_bytes,
             r.first_forward_bytes);
  report.add("second forward (parameters exist already)", 0, r.second_forward_bytes);
  report.add(fmt::format("for comparison: Linear({}, {}) at construction", r.in_features, r.hidden),
             r.eager_expected, r.eager_construction_bytes);
  report.add(fmt::format("LazyLinear({}, bias=false) after a forward", r.hidden),
             r.weight_only_expected, r.weight_only_bytes);
  report.print();
  fmt::print("\nparameters after the first forward: {}\n", fmt::join(r.parameter_names, ", "));
  const auto with_bias = std::count_if(r.layers.begin(), r.layers.end(),
                                       [](const LazyLayerRow& row) { return row.has_bias; });
  fmt::print(
      "\nThe article's LazyLinear stores `self.bias = bias` and then sets `self.bias = None`, "
      "so its\ncheck `self.bias is not None and self.bias is None` is never true: that layer "
      "silently has no\n"
      "bias and holds only its weight (for the first layer {}, the bias=false row). memgrad's\n"
      "LazyLinear creates the bias: {} of {} layers have a \"bias\" parameter, counted above.\n",
      human_bytes(r.weight_only_expected), with_bias, r.layers.size());
  const bool all_bias = with_bias == static_cast<std::ptrdiff_t>(r.layers.size());
  print_conclusion(fmt::format(
      "the model held {} parameter bytes and {} parameters until its first forward, then exactly "
      "{} bytes ({} weights and biases, each rounded to 512); the second forward added {}.{}",
      r.construction_bytes, r.parameters_before, with_commas(r.first_forward_bytes),
      r.layers.size(), r.second_forward_bytes, all_bias ? "" : " A bias is MISSING."));
  return workspace_ok && report.all_match() && all_bias && r.parameters_before == 0 ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b15_lazy_init_main() is its main() (a generated file calls it).
int b15_lazy_init_main(int argc, char** argv) { return run_behaviour(argc, argv, kInfo, body); }

}  // namespace memgrad::examples
