// B23 -- will it fit? A training step's memory, estimated before it runs (docs/estimate.md).
//
// The same AdamW step of a small CharLM runs twice from an empty device of the same capacity and
// policy: on sim:N, which computes, and on meta:N, whose tensors have shapes and no values and
// whose kernels do nothing. The allocator decides blocks, splits and segments from sizes alone,
// so the estimate (meta) must equal the real run in every byte, phase by phase, and in its peaks.
// Then a step shaped like GPT-2 XL (48 blocks of width 1600, 25 heads, context 1024: about 1.5
// billion parameters), which no machine of this kind can run, is estimated on an 80 GiB and a
// 16 GiB device, and the largest batch that fits in 80 GiB is searched for, each probe a meta
// step of a few milliseconds.
//
//   ./memgrad example b23 [--size N]
#include "examples/behaviours/b23_will_it_fit.h"

#include <fmt/format.h>

#include "allocator/error.h"
#include "allocator/trace.h"
#include "autograd/autograd.h"
#include "engine/memgrad.h"
#include "engine/optim/optimizer.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"

namespace memgrad::examples {
namespace {

constexpr int64_t kVocab = 86;  // the characters of train_charlm's default text
constexpr int64_t kSmallCapacity = int64_t{1} << 30;
constexpr int64_t kLargeCapacities[] = {int64_t{80} << 30, int64_t{16} << 30};

int64_t allocated_on(Device device) { return static_cast<int64_t>(memory_allocated(device)); }

}  // namespace

StepMemory measure_step(const CharLMShape& shape, int64_t batch, Device device, int64_t capacity) {
  if (device.is_meta()) {
    set_meta_capacity(device.index(), static_cast<size_t>(capacity));  // a fresh allocator
  } else {
    set_sim_capacity(device.index(), static_cast<size_t>(capacity));
  }
  StepMemory m;
  manual_seed(0);
  const char* during = "model init";
  try {
    CharLM model(shape, 0.0, 0, device);
    m.after_init = allocated_on(device);
    optim::AdamW optimizer(model.parameters(), optim::AdamOptions{.weight_decay = 0.01});
    const TensorOptions tokens = TensorOptions(kInt64).with_device(device);
    const Tensor input = randint(0, shape.vocab, {batch, shape.context}, tokens);
    const Tensor target = randint(0, shape.vocab, {batch, shape.context}, tokens);
    Tensor loss;
    during = "forward";
    {
      TracePhaseScope phase("forward");
      loss = charlm_loss(model, input, target, false).loss;
    }
    m.after_forward = allocated_on(device);
    during = "backward";
    loss.backward();
    loss = Tensor();
    m.after_backward = allocated_on(device);
    during = "optimizer step";
    optimizer.step();
    m.after_step = allocated_on(device);
    optimizer.zero_grad();
    m.after_zero_grad = allocated_on(device);
  } catch (const OutOfMemoryError& e) {
    m.out_of_memory = true;
    m.oom_during = during;
    const std::string what = e.what();
    m.oom_message = what.substr(0, what.find('\n'));
  }
  m.peak_allocated = static_cast<int64_t>(max_memory_allocated(device));
  m.peak_reserved = static_cast<int64_t>(max_memory_reserved(device));
  m.device_allocs = memory_stats(device).num_device_alloc;
  return m;
}

WillItFitResult measure_will_it_fit(int64_t size, int index, int64_t large_layers) {
  WillItFitResult r;
  r.small = {kVocab, 128, 4, 4, 64};
  r.small_batch = 8 * size;
  r.capacity = kSmallCapacity;
  const Device sim(DeviceType::Sim, index), meta(DeviceType::Meta, index);
  r.real_device = sim.str();
  r.meta_device = meta.str();
  r.real = measure_step(r.small, r.small_batch, sim, r.capacity);
  r.estimate = measure_step(r.small, r.small_batch, meta, r.capacity);
  set_sim_capacity(index, static_cast<size_t>(r.capacity));  // give the real run's bytes back

  r.large = {kVocab, 1600, large_layers, 25, 1024};
  {
    set_meta_capacity(index, static_cast<size_t>(kLargeCapacities[0]));
    const CharLM counted(r.large, 0.0, 0, meta);
    r.large_parameters = counted.num_parameters();
  }
  for (int64_t capacity : kLargeCapacities) {
    r.large_runs.emplace_back(capacity, measure_step(r.large, 1, meta, capacity));
  }
  const int64_t capacity = kLargeCapacities[0];
  auto fits = [&](int64_t batch) {
    const bool ok = !measure_step(r.large, batch, meta, capacity).out_of_memory;
    r.batch_probes.emplace_back(batch, ok);
    return ok;
  };
  if (fits(1)) {
    int64_t low = 1, high = 2;
    while (high <= 4096 && fits(high)) {
      low = high;
      high *= 2;
    }
    while (high - low > 1) {
      const int64_t middle = (low + high) / 2;
      (fits(middle) ? low : high) = middle;
    }
    r.largest_batch = low;
  }
  set_meta_capacity(index, static_cast<size_t>(capacity));  // a fresh, empty device again
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B23", "will it fit? a step's memory, estimated before it runs",
    "docs/estimate.md; pytorch#114934 (an estimate before running)",
    "A training step's memory is decided by shapes, not values: run on a device whose tensors "
    "have no values (PyTorch's meta device), the same allocator allocates exactly what the real "
    "run does, so a configuration can be tried before anything is computed."};

std::string describe(const CharLMShape& s) {
  return fmt::format("{} blocks of width {} ({} heads, context {}, {} characters)", s.layers,
                     s.width, s.heads, s.context, s.vocab);
}

int body(const BehaviourFlags& flags) {
  const WillItFitResult r = measure_will_it_fit(flags.size, 0);
  fmt::print(
      "A CharLM of {}, AdamW, batch {}: one training step from an empty device of {}, caching "
      "allocator, on {} (which computes) and on {} (shapes only: no kernel runs, no page is "
      "touched).\n\n",
      describe(r.small), r.small_batch, human_bytes(r.capacity), r.real_device, r.meta_device);
  MemoryReport report(fmt::format("expected: the estimate on {}; measured: the real run on {}",
                                  r.meta_device, r.real_device));
  const StepMemory &e = r.estimate, &m = r.real;
  report.add("after model init (parameters, causal masks)", e.after_init, m.after_init);
  report.add("after forward (+ batch, saved activations, loss)", e.after_forward, m.after_forward);
  report.add("after backward (+ gradients, - activations)", e.after_backward, m.after_backward);
  report.add("after optimizer step (+ AdamW state)", e.after_step, m.after_step);
  report.add("after zero_grad (- gradients)", e.after_zero_grad, m.after_zero_grad);
  report.add("peak allocated", e.peak_allocated, m.peak_allocated);
  report.add("peak reserved", e.peak_reserved, m.peak_reserved);
  report.print();
  const bool same_segments = e.device_allocs == m.device_allocs;
  fmt::print("  segments obtained from the device: {} estimated, {} in the real run: {}\n",
             e.device_allocs, m.device_allocs, same_segments ? "the same" : "NOT the same");

  fmt::print("\nA step shaped like GPT-2 XL: {}, {} parameters, AdamW, batch 1, estimated on {}:\n",
             describe(r.large), with_commas(r.large_parameters), r.meta_device);
  bool large_ok = true;
  for (const auto& [capacity, step] : r.large_runs) {
    if (step.out_of_memory) {
      fmt::print("  a device of {}: does not fit, out of memory in the {}: {}\n",
                 human_bytes(capacity), step.oom_during, step.oom_message);
    } else {
      fmt::print("  a device of {}: fits; peak allocated {} B ({}), peak reserved {} B ({})\n",
                 human_bytes(capacity), with_commas(step.peak_allocated),
                 human_bytes(step.peak_allocated), with_commas(step.peak_reserved),
                 human_bytes(step.peak_reserved));
    }
  }
  const StepMemory& fits80 = r.large_runs.front().second;
  large_ok = !fits80.out_of_memory && r.large_runs.back().second.out_of_memory;
  std::string probes;
  for (const auto& [batch, ok] : r.batch_probes) {
    probes += fmt::format("{}{} {}", probes.empty() ? "" : ", ", batch, ok ? "fits" : "does not");
  }
  fmt::print("  the largest batch that fits in {}: {} ({} meta steps: {})\n",
             human_bytes(r.large_runs.front().first), r.largest_batch, r.batch_probes.size(),
             probes);
  fmt::print("  at batch 1 on 80 GiB: parameters and masks {} B, AdamW state {} B\n",
             with_commas(fits80.after_init),
             with_commas(fits80.after_step - fits80.after_backward));
  const bool same = report.all_match() && same_segments;
  print_conclusion(fmt::format(
      "the estimate on {} {} the real run on {} in every phase, both peaks and the segment count; "
      "the 1.5-billion-parameter step that no machine of this kind can run needs {} at its peak, "
      "fits in 80 GiB up to a batch of {} and does not fit in 16 GiB, found in {} meta steps of "
      "milliseconds each.",
      r.meta_device, same ? "equals" : "does NOT equal", r.real_device,
      human_bytes(fits80.peak_allocated), r.largest_batch, r.batch_probes.size() + 2));
  return same && large_ok ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b23_will_it_fit_main() is its main() (a generated file calls it).
int b23_will_it_fit_main(int argc, char** argv) { return run_behaviour(argc, argv, kInfo, body); }

}  // namespace memgrad::examples
