// B11 -- deleting references frees memory (seeds 003 §2 and 001 §10).
//
// memgrad tensors are reference counted: when the last handle to a storage goes (a handle reset
// with `t = Tensor()`, the C++ spelling of `del t`, or a handle leaving its scope), the block
// returns to the allocator's cache inside that statement; allocated drops at once and reserved
// stays (the cache keeps the block for reuse until empty_cache()). No garbage collector is
// involved. What keeps memory alive is another reference: a view of the tensor, a graph whose
// loss is still held (its nodes hold the saved activations), or a list of loss tensors kept
// for logging, which keeps every step's graph when no backward ran. Keeping loss.item() keeps
// nothing.
//
//   ./memgrad example b11 [--size N] [--device sim:0]
#include "examples/behaviours/b11_freeing_references.h"

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

void measure_handles(FreeingResult& r, int64_t size, Device device) {
  const TensorOptions opts = TensorOptions(kFloat32).with_device(device);
  const Shape shape = {256 * size, 1024};
  const int64_t n = r.tensor_bytes = rounded(256 * size * 1024 * 4);
  const int64_t base = allocated_on(device);
  auto above = [&] { return allocated_on(device) - base; };
  Tensor t = empty(shape, opts);
  r.handles.push_back({"t = empty(...)", n, above()});
  const int64_t reserved = static_cast<int64_t>(memory_reserved(device));
  t = Tensor();
  r.reserved_change_on_reset = static_cast<int64_t>(memory_reserved(device)) - reserved;
  r.handles.push_back({"t = Tensor()  (the C++ del)", 0, above()});
  {
    const Tensor u = empty(shape, opts);
    r.handles.push_back({"inside a scope holding u", n, above()});
  }
  r.handles.push_back({"after the scope's closing brace", 0, above()});
  Tensor big = empty(shape, opts);
  Tensor row = big[0];  // a 4 KiB view of the whole block
  big = Tensor();
  r.handles.push_back({"base reset while a one-row view lives", n, above()});
  row = Tensor();
  r.handles.push_back({"view reset too", 0, above()});
}

using Model = nn::Sequential;

std::unique_ptr<Model> make_model(Device device) {
  const nn::LinearOptions lo{true, device, kFloat32};
  return std::make_unique<Model>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
      std::make_shared<nn::Linear>(kWidth, kWidth, lo), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(kWidth, kWidth, lo), std::make_shared<nn::ReLU>()});
}

void measure_graph(FreeingResult& r, Model& model, const Tensor& x, Device device) {
  const int64_t base = allocated_on(device);
  auto above = [&] { return allocated_on(device) - base; };
  Tensor out = model.forward(x);
  Tensor loss = out.sum();
  r.graph.push_back({"out = model(x); loss = out.sum()", r.graph_bytes, above()});
  out = Tensor();
  r.graph.push_back({"out reset: the graph still holds 2 activations", r.graph_bytes, above()});
  loss = Tensor();
  r.graph.push_back({"loss reset: the graph goes, and its activations", 0, above()});
}

// `steps` steps of loss = model(x).sum(), logged as tensors or as numbers, with or without a
// backward per step. Readings after each step.
std::vector<ReferenceStep> logging_steps(Model& model, const Tensor& x, Device device,
                                         int64_t steps, bool keep_tensor, bool train,
                                         int64_t per_step) {
  std::vector<Tensor> history;
  double total = 0;
  std::vector<ReferenceStep> rows;
  const int64_t base = allocated_on(device);
  for (int64_t k = 1; k <= steps; ++k) {
    {  // one step; its own handles end with the block, as they would in a loop body
      if (train) model.zero_grad(/*set_to_none=*/false);
      const Tensor loss = model.forward(x).sum();
      if (train) loss.backward();
      if (keep_tensor) {
        history.push_back(loss);
      } else {
        total += loss.item<double>();
      }
    }
    rows.push_back({fmt::format("after step {}", k), keep_tensor ? k * per_step : 0,
                    allocated_on(device) - base});
  }
  (void)total;
  return rows;
}

}  // namespace

FreeingResult measure_freeing(int64_t size, Device device, int64_t steps) {
  FreeingResult r;
  measure_handles(r, size, device);
  manual_seed(0);
  const auto model = make_model(device);
  const Tensor x = randn({64 * size, kWidth}, TensorOptions(kFloat32).with_device(device));
  r.activation_bytes = rounded(64 * size * kWidth * 4);
  r.graph_bytes = 2 * r.activation_bytes + rounded(4);
  measure_graph(r, *model, x, device);
  r.eval_tensors = logging_steps(*model, x, device, steps, true, false, r.graph_bytes);
  r.eval_items = logging_steps(*model, x, device, steps, false, false, r.graph_bytes);
  model->forward(x).sum().backward();  // the gradients exist before the training steps
  r.train_tensors = logging_steps(*model, x, device, steps, true, true, rounded(4));
  r.train_items = logging_steps(*model, x, device, steps, false, true, rounded(4));
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B11", "deleting references frees memory", "seeds 003 (section 2) and 001 (section 10)",
    "del on tensors that are no longer needed (the loss and outputs after a step) frees their "
    "memory; 001 adds that CPU memory is left to the garbage collector and that for GPU memory "
    "dropping references may not be enough, suggesting gc.collect() and empty_cache()."};

void add_rows(MemoryReport& report, const std::vector<ReferenceStep>& rows,
              const std::string& prefix) {
  for (const ReferenceStep& s : rows) report.add(prefix + s.what, s.expected, s.measured);
}

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const bool workspace_ok = take_cublas_workspace(device);
  const FreeingResult r = measure_freeing(flags.size, device);
  MemoryReport handles(fmt::format(
      "1. A float32 ({}, 1024) tensor of {} B on {}, allocated above the start:", 256 * flags.size,
      with_commas(r.tensor_bytes), device.str()));
  add_rows(handles, r.handles, "");
  handles.add("reserved change when t was reset (cached, not returned)", 0,
              r.reserved_change_on_reset);
  handles.print();
  MemoryReport graph(
      fmt::format("\n2. Linear+ReLU+Linear+ReLU ({w}) on a ({}, {w}) batch; one activation = {} B:",
                  64 * flags.size, with_commas(r.activation_bytes), fmt::arg("w", kWidth)));
  add_rows(graph, r.graph, "");
  graph.print();
  MemoryReport eval("\n3. Evaluation in grad mode (no backward), logging the loss each step:");
  add_rows(eval, r.eval_tensors, "losses.push_back(loss), ");
  add_rows(eval, r.eval_items, "total += loss.item(),    ");
  eval.print();
  MemoryReport train("\n4. Training steps (backward each step), logging the loss each step:");
  add_rows(train, r.train_tensors, "losses.push_back(loss), ");
  add_rows(train, r.train_items, "total += loss.item(),    ");
  train.print();
  const bool ok = handles.all_match() && graph.all_match() && eval.all_match() && train.all_match();
  print_conclusion(fmt::format(
      "resetting the last handle or leaving its scope returned the {} B block immediately "
      "(deterministic reference counting, no collector; reserved unchanged: the block stays "
      "cached for reuse, and only empty_cache() would return it). Memory stayed pinned by a view "
      "({} B for a 4 KiB row), by a held loss ({} B: the saved activations of its graph, and "
      "itself), and by logged loss tensors: {} B per step without backward (each step's graph), "
      "{} B per step with backward (backward already freed the saved tensors); loss.item() kept "
      "nothing.",
      with_commas(r.tensor_bytes), with_commas(r.handles[4].measured),
      with_commas(r.graph[1].measured), with_commas(r.eval_tensors.front().measured),
      with_commas(r.train_tensors.front().measured)));
  return workspace_ok && ok ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b11_freeing_references_main() is its main() (a generated file calls it).
int b11_freeing_references_main(int argc, char** argv) {
  return run_behaviour(argc, argv, kInfo, body);
}

}  // namespace memgrad::examples
