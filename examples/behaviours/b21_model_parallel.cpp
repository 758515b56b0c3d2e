// B21 -- model parallelism: layers on different devices (seed 001 §9c).
//
// A four-layer classifier is split in two: layers 1-2 on one device, layers 3-4 on another,
// the activation between them moved with .to(device). Each device's allocator is read around
// every phase of a training step, so the split shows per device: each holds only its own
// layers' parameters, gradients and Adam state, and its own saved activations (the activation
// crossing the boundary exists on both sides: the first device keeps it as the ReLU output saved
// for backward, the second as the input saved by layer 3). Backward carries the gradient back
// across the boundary, so the first device's parameters get their gradients too. On a CPU-only
// machine the two devices are bounded simulated devices (sim:0, sim:1); with two GPUs the same
// program runs on cuda:0 and cuda:1.
//
//   ./memgrad example b21 [--size N]
#include "examples/behaviours/b21_model_parallel.h"

#include <memory>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "engine/cuda.h"
#include "engine/nn/functional.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"

namespace memgrad::examples {
namespace {

constexpr int64_t kInputs = 256;
constexpr int64_t kClasses = 10;
constexpr int64_t kBatch = 64;
constexpr int64_t kScalar = 512;  // a 0-d float32 tensor, rounded

// Layers 1-2 on one device, 3-4 on the other.
class TwoDeviceMlp final : public nn::UnaryModule {
 public:
  TwoDeviceMlp(int64_t hidden, Device first, Device second) : second_(second) {
    const nn::LinearOptions a{true, first, kFloat32}, b{true, second, kFloat32};
    first_half_ = register_module(
        "first",
        std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
            std::make_shared<nn::Linear>(kInputs, hidden, a), std::make_shared<nn::ReLU>(),
            std::make_shared<nn::Linear>(hidden, hidden, a), std::make_shared<nn::ReLU>()}));
    second_half_ = register_module(
        "second",
        std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
            std::make_shared<nn::Linear>(hidden, hidden, b), std::make_shared<nn::ReLU>(),
            std::make_shared<nn::Linear>(hidden, kClasses, b)}));
  }
  Tensor forward(const Tensor& x) override {
    return second_half_->forward(first_half_->forward(x).to(second_));
  }
  std::string name() const override { return "TwoDeviceMlp"; }
  const nn::Sequential& half(int i) const { return i == 0 ? *first_half_ : *second_half_; }

 private:
  Device second_;
  std::shared_ptr<nn::Sequential> first_half_, second_half_;
};

// Reads both devices' allocated bytes and records each phase's change.
class TwoDeviceMeter {
 public:
  TwoDeviceMeter(std::array<Device, 2> devices, std::vector<DeviceStage>& stages)
      : devices_(devices), stages_(stages), last_(now()) {}
  void mark(std::string what, std::array<int64_t, 2> expected) {
    const std::array<int64_t, 2> current = now();
    stages_.push_back({std::move(what), expected, {current[0] - last_[0], current[1] - last_[1]}});
    last_ = current;
  }

 private:
  std::array<int64_t, 2> now() const {
    return {static_cast<int64_t>(memory_allocated(devices_[0])),
            static_cast<int64_t>(memory_allocated(devices_[1]))};
  }
  std::array<Device, 2> devices_;
  std::vector<DeviceStage>& stages_;
  std::array<int64_t, 2> last_;
};

bool has_gradients(const nn::Module& half, Device device) {
  for (const Tensor& p : half.parameters()) {
    const Tensor g = p.grad();
    if (!g.defined() || g.device() != device || g.abs().sum().item<double>() == 0.0) return false;
  }
  return true;
}

}  // namespace

ModelParallelResult measure_model_parallel(int64_t size, Device first, Device second,
                                           size_t capacity) {
  if (capacity != 0) {
    set_sim_capacity(first.index(), capacity);
    set_sim_capacity(second.index(), capacity);
  }
  ModelParallelResult r;
  r.devices = {first, second};
  r.inputs = kInputs;
  r.hidden = 256 * size;
  r.classes = kClasses;
  r.batch = kBatch;
  const int64_t h = r.hidden;
  r.parameter_bytes = {
      rounded(h * kInputs * 4) + rounded(h * 4) + rounded(h * h * 4) + rounded(h * 4),
      rounded(h * h * 4) + rounded(h * 4) + rounded(kClasses * h * 4) + rounded(kClasses * 4)};
  r.activation_bytes = rounded(kBatch * h * 4);
  const int64_t act = r.activation_bytes, small = rounded(kBatch * kClasses * 4);
  const auto& p = r.parameter_bytes;
  for (Device d : r.devices) {
    // A first matrix product on each device, so that one-time costs (a cuBLAS workspace on a
    // GPU) are not counted in the forward below.
    const TensorOptions o = TensorOptions(kFloat32).with_device(d);
    mm(ones({1, 1}, o), ones({1, 1}, o));
    reset_peak_memory_stats(d);
  }

  TwoDeviceMeter meter(r.devices, r.stages);
  Generator g(21);
  const Tensor x = randn({kBatch, kInputs}, TensorOptions(kFloat32).with_device(first), &g);
  const Tensor y = randint(0, kClasses, {kBatch}, TensorOptions(kInt64).with_device(second), &g);
  meter.mark("data: inputs on the first, targets on the second",
             {rounded(kBatch * kInputs * 4), rounded(kBatch * 8)});
  TwoDeviceMlp model(h, first, second);
  meter.mark("model init: each device's layers", {p[0], p[1]});
  optim::Adam optimizer(model.parameters(), {.lr = 1e-3});
  Tensor logits = model.forward(x);
  Tensor loss = nn::cross_entropy(logits, y);
  meter.mark("forward: saved activations (+ logits, log-probs, loss)",
             {2 * act, 2 * act + 2 * small + kScalar});
  loss.backward();
  meter.mark("backward: + gradients - saved activations", {p[0] - 2 * act, p[1] - 2 * act - small});
  r.grads_on_device = {has_gradients(model.half(0), first), has_gradients(model.half(1), second)};
  optimizer.step();
  meter.mark("Adam step: + exp_avg + exp_avg_sq", {2 * p[0], 2 * p[1]});
  optimizer.zero_grad();
  meter.mark("zero_grad(set_to_none): - gradients", {-p[0], -p[1]});
  for (size_t i = 0; i < 2; ++i) {
    r.peak[i] = static_cast<int64_t>(max_memory_allocated(r.devices[i]));
  }
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B21", "model parallel: layers on different devices", "seed 001 (section 9c)",
    "Placing different layers of a model on different GPUs divides the model's memory between "
    "the devices."};

constexpr size_t kSimCapacity = 64ull << 20;  // 64 MiB per simulated device

// Prints one run and returns whether every expectation held.
bool report_run(const ModelParallelResult& r) {
  MemoryReport report(fmt::format(
      "MLP {}-{}-{} | {}-{} split over {} (layers 1-2) and {} (layers 3-4), Adam, batch {}:",
      r.inputs, r.hidden, r.hidden, r.hidden, r.classes, r.devices[0].str(), r.devices[1].str(),
      r.batch));
  for (const DeviceStage& s : r.stages) {
    for (size_t i = 0; i < 2; ++i) {
      report.add(fmt::format("{:<6} {}", r.devices[i].str(), s.what), s.expected[i], s.measured[i]);
    }
  }
  for (size_t i = 0; i < 2; ++i) {
    report.note(fmt::format("{:<6} peak allocated during the step", r.devices[i].str()), r.peak[i]);
  }
  report.print();
  fmt::print("\ngradients after backward: layers 1-2 on {}: {}; layers 3-4 on {}: {}\n",
             r.devices[0].str(), r.grads_on_device[0] ? "all present, non-zero" : "MISSING",
             r.devices[1].str(), r.grads_on_device[1] ? "all present, non-zero" : "MISSING");
  return report.all_match() && r.grads_on_device[0] && r.grads_on_device[1];
}

int body(const BehaviourFlags& flags) {
  const ModelParallelResult sim =
      measure_model_parallel(flags.size, Device("sim:0"), Device("sim:1"), kSimCapacity);
  fmt::print("simulated devices sim:0 and sim:1, {} each:\n\n", human_bytes(kSimCapacity));
  bool ok = report_run(sim);
  if (cuda::device_count() >= 2) {
    fmt::print("\nthe same on two GPUs:\n\n");
    ok =
        report_run(measure_model_parallel(flags.size, Device("cuda:0"), Device("cuda:1"), 0)) && ok;
  } else {
    fmt::print("the GPU variant (cuda:0 and cuda:1) needs two CUDA devices; this machine has {}.\n",
               cuda::device_count());
  }
  print_conclusion(fmt::format(
      "{} held {} of parameters and {} held {}; each device's gradients, Adam state and saved "
      "activations stayed on it, and the gradient crossed back to {} through the .to() copy.",
      sim.devices[0].str(), human_bytes(sim.parameter_bytes[0]), sim.devices[1].str(),
      human_bytes(sim.parameter_bytes[1]), sim.devices[0].str()));
  return ok ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b21_model_parallel_main() is its main() (a generated file calls it).
int b21_model_parallel_main(int argc, char** argv) {
  return run_behaviour(argc, argv, kInfo, body);
}

}  // namespace memgrad::examples
