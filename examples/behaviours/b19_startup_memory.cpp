// B19 -- start-up memory: parameters, graph, data (seed 002).
//
// The first steps of a small MLP training run on synthetic data, phase by phase, with the bytes
// each phase should add computed from the shapes first:
//   data               the batch: inputs (64 x 256 float32) and int64 targets
//   model              every weight and bias
//   first forward      what autograd saves for backward (the two ReLU outputs, which are also
//                      the next Linear's inputs; the log-probabilities of cross_entropy) plus the
//                      logits and the 0-d loss the program holds; on a CUDA device also
//                      cuBLAS's workspace, which the first matrix product allocates and keeps
//   first backward     + one gradient per parameter, - the saved activations it frees
//   first Adam step    + exp_avg and exp_avg_sq per parameter, created lazily at this step
//   zero_grad          - the gradients (set_to_none)
// and a second whole step, which allocates nothing that outlives it.
//
//   ./memgrad example b19 [--size N] [--device sim:0]
#include "examples/behaviours/b19_startup_memory.h"

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

// Records the allocated-bytes change of one phase against its expectation.
class PhaseMeter {
 public:
  PhaseMeter(Device device, std::vector<StartupPhase>& phases)
      : device_(device), phases_(phases), last_(now()) {}
  void mark(std::string what, int64_t expected) {
    const int64_t current = now();
    phases_.push_back({std::move(what), expected, current - last_});
    last_ = current;
  }
  void restart() { last_ = now(); }

 private:
  int64_t now() const { return static_cast<int64_t>(memory_allocated(device_)); }
  Device device_;
  std::vector<StartupPhase>& phases_;
  int64_t last_;
};

}  // namespace

StartupMemoryResult measure_startup_memory(int64_t size, Device device) {
  StartupMemoryResult r;
  r.inputs = kInputs;
  r.hidden = 256 * size;
  r.classes = kClasses;
  r.batch = kBatch;
  // Expectations first, from the shapes.
  r.parameter_bytes = rounded(r.hidden * kInputs * 4) + rounded(r.hidden * 4) +
                      rounded(r.hidden * r.hidden * 4) + rounded(r.hidden * 4) +
                      rounded(kClasses * r.hidden * 4) + rounded(kClasses * 4);
  r.activation_bytes = rounded(kBatch * r.hidden * 4);
  r.logits_bytes = rounded(kBatch * kClasses * 4);
  const int64_t params = r.parameter_bytes, act = r.activation_bytes, small = r.logits_bytes;

  // On a GPU the first forward takes cuBLAS's workspace: one taken earlier in this process goes
  // back first, so that it is taken there.
  if (device.is_cuda()) cuda::clear_cublas_workspaces(device.index());
  PhaseMeter meter(device, r.phases);
  Generator g(19);
  const Tensor x = randn({kBatch, kInputs}, TensorOptions(kFloat32).with_device(device), &g);
  const Tensor y = randint(0, kClasses, {kBatch}, TensorOptions(kInt64).with_device(device), &g);
  meter.mark("data: one batch (inputs + int64 targets)",
             rounded(kBatch * kInputs * 4) + rounded(kBatch * 8));
  const nn::LinearOptions o{true, device, kFloat32};
  nn::Sequential model(
      {std::make_shared<nn::Linear>(kInputs, r.hidden, o), std::make_shared<nn::ReLU>(),
       std::make_shared<nn::Linear>(r.hidden, r.hidden, o), std::make_shared<nn::ReLU>(),
       std::make_shared<nn::Linear>(r.hidden, kClasses, o)});
  meter.mark("model construction: the parameters", params);
  optim::Adam optimizer(model.parameters(), {.lr = 1e-3});
  r.adam_state_before = static_cast<int64_t>(optimizer.state_nbytes());
  meter.mark("Adam constructed (no state yet)", 0);

  reset_peak_memory_stats(device);
  const int64_t step_start = static_cast<int64_t>(memory_allocated(device));
  Tensor logits = model.forward(x);
  Tensor loss = nn::cross_entropy(logits, y);
  r.workspace_bytes = cublas_workspace_bytes(device);
  meter.mark(r.workspace_bytes == 0
                 ? "first forward: 2 saved ReLU outputs + log-probs + logits + loss"
                 : "first forward: the same + cuBLAS's workspace (at the first matmul)",
             2 * act + 2 * small + kScalar + r.workspace_bytes);
  loss.backward();
  meter.mark("first backward: + gradients - saved activations", params - 2 * act - small);
  optimizer.step();
  r.adam_state_after = static_cast<int64_t>(optimizer.state_nbytes());
  meter.mark("first Adam step: + exp_avg + exp_avg_sq (lazily)", 2 * params);
  optimizer.zero_grad();
  meter.mark("zero_grad(set_to_none): - gradients", -params);
  r.peak_above_start = static_cast<int64_t>(max_memory_allocated(device)) - step_start;
  logits = Tensor();
  loss = Tensor();
  meter.mark("release the logits and the loss", -small - kScalar);

  const Tensor second = nn::cross_entropy(model.forward(x), y);
  second.backward();
  optimizer.step();
  optimizer.zero_grad();
  meter.mark("second whole step (keeps only its 0-d loss)", kScalar);
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B19", "start-up memory: parameters, graph, data", "seed 002",
    "Much memory is taken before training really runs: by the model's parameters when it is "
    "built, by the tensors the autograd graph keeps during the forward pass, and by the data."};

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const StartupMemoryResult r = measure_startup_memory(flags.size, device);
  MemoryReport report(fmt::format(
      "MLP {}-{}-{}-{} (ReLU), Adam, batch {}, float32 on {}; allocated bytes each phase adds:",
      r.inputs, r.hidden, r.hidden, r.classes, r.batch, device.str()));
  int64_t total = 0;
  for (const StartupPhase& p : r.phases) {
    report.add(p.what, p.expected, p.measured);
    total += p.measured;
  }
  report.note("peak during the first step, above its start", r.peak_above_start);
  report.note("held at the end (data, parameters, Adam state, last loss)", total);
  report.print();
  fmt::print(
      "\none activation ({} x {}) = {} B; parameters = {} B; Adam state (state_nbytes) "
      "before the first step: {} B, after it: {} B\n",
      r.batch, r.hidden, with_commas(r.activation_bytes), with_commas(r.parameter_bytes),
      r.adam_state_before, with_commas(r.adam_state_after));
  print_conclusion(fmt::format(
      "the parameters ({}) arrived with the model, the graph's saved activations ({}) with the "
      "first forward and left with the first backward, and Adam's state ({} = 2 x parameters) only "
      "at the first step; a second step kept nothing but its 0-d loss.",
      human_bytes(r.parameter_bytes), human_bytes(2 * r.activation_bytes + r.logits_bytes),
      human_bytes(r.adam_state_after)));
  if (r.workspace_bytes != 0) {
    fmt::print("on {} the first forward also took cuBLAS's workspace ({}), kept for the process\n",
               device.str(), human_bytes(r.workspace_bytes));
  }
  return report.all_match() && r.adam_state_before == 0 &&
                 r.adam_state_after == 2 * r.parameter_bytes
             ? 0
             : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b19_startup_memory_main() is its main() (a generated file calls it).
int b19_startup_memory_main(int argc, char** argv) {
  return run_behaviour(argc, argv, kInfo, body);
}

}  // namespace memgrad::examples
