// B12 -- detach() drops the graph and shares storage (seed 003 §8).
//
// y = model(x) holds its graph, and with it one saved activation per layer. d = y.detach()
// allocates nothing: it is a new tensor over y's storage, sharing y's version counter (an
// in-place op on d bumps y's version, so autograd would notice that a saved y changed), with no
// history. Detaching alone frees nothing while y is alive; once y is reset the graph has no
// owner and its saved activations return to the cache, and d keeps only the output's storage.
//
//   ./memgrad example b12 [--size N] [--device sim:0]
#include "examples/behaviours/b12_detach.h"

#include <memory>
#include <vector>

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

}  // namespace

DetachResult measure_detach(int64_t size, Device device, int64_t layers) {
  DetachResult r;
  r.layers = layers;
  r.batch = 64 * size;
  r.width = kWidth;
  r.activation_bytes = rounded(r.batch * kWidth * 4);
  manual_seed(0);
  nn::Sequential model;
  for (int64_t i = 0; i < layers; ++i) {
    model.push_back(
        std::make_shared<nn::Linear>(kWidth, kWidth, nn::LinearOptions{true, device, kFloat32}));
    model.push_back(std::make_shared<nn::ReLU>());
  }
  const Tensor x = randn({r.batch, kWidth}, TensorOptions(kFloat32).with_device(device));
  const int64_t base = allocated_on(device);

  Tensor y = model.forward(x);
  r.kept_by_output = allocated_on(device) - base;
  const int64_t before = allocated_on(device);
  Tensor d = y.detach();
  r.detach_bytes = allocated_on(device) - before;
  r.shares_storage = d.shares_storage_with(y);
  r.data_offset = static_cast<char*>(d.data_ptr()) - static_cast<char*>(y.data_ptr());
  r.d_requires_grad = d.requires_grad();
  r.d_is_leaf = d.is_leaf();
  r.y_version_before = y.version();
  d.mul_(1.0);  // in place on d: the shared counter moves for y too
  r.y_version_after = y.version();
  y = Tensor();
  r.kept_by_detached = allocated_on(device) - base;
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B12", "detach() drops the graph and shares storage", "seed 003 (section 8)",
    "Graphs that are no longer needed should not be kept; detach() gives a tensor that shares its "
    "source's storage but takes no part in gradient computation."};

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const bool workspace_ok = take_cublas_workspace(device);
  const DetachResult r = measure_detach(flags.size, device);
  const int64_t act = r.activation_bytes;
  fmt::print(
      "y = model(x): {} x (Linear({w}, {w}) + ReLU) on a float32 ({}, {w}) batch on {}; "
      "one activation = {} B.\n\n",
      r.layers, r.batch, device.str(), with_commas(act), fmt::arg("w", r.width));
  MemoryReport report("Allocated bytes:");
  report.add("y held: its graph keeps one activation per layer (y included)", r.layers * act,
             r.kept_by_output);
  report.add("d = y.detach() allocates", 0, r.detach_bytes);
  report.add("y reset, d kept: the graph and its saved activations are gone", act,
             r.kept_by_detached);
  report.print();
  const bool versions = r.y_version_after == r.y_version_before + 1;
  fmt::print(
      "\nd shares y's storage: {} (d.data_ptr() - y.data_ptr() = {} B); d.requires_grad(): {}; "
      "d.is_leaf(): {}\nd.mul_(1) moved y's version from {} to {} (one shared version counter)\n",
      r.shares_storage ? "yes" : "no", r.data_offset, r.d_requires_grad, r.d_is_leaf,
      r.y_version_before, r.y_version_after);
  const bool ok = report.all_match() && r.shares_storage && r.data_offset == 0 &&
                  !r.d_requires_grad && r.d_is_leaf && versions;
  print_conclusion(fmt::format(
      "detach() added {} B and aliases y; it does not free anything by itself: the {} B of saved "
      "activations were released only when y (the graph's last owner) was reset, leaving {} B, "
      "the output's storage that d shares.",
      r.detach_bytes, with_commas(r.kept_by_output - r.kept_by_detached),
      with_commas(r.kept_by_detached)));
  return workspace_ok && ok ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b12_detach_main() is its main() (a generated file calls it).
int b12_detach_main(int argc, char** argv) { return run_behaviour(argc, argv, kInfo, body); }

}  // namespace memgrad::examples
