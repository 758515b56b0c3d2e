// B14 -- mixed precision: float16 autocast and GradScaler (seeds 001 §9b and 003 §7).
//
// Memory: the same MLP runs one forward (with its cross-entropy loss) in float32 and inside an
// AutocastGuard. A saved-tensor pack hook lists everything autograd saves, so the kept bytes are
// broken down by what they are: the hidden activations (Linear outputs after their ReLU) are
// float16 under autocast and take exactly half the bytes; the log-probabilities stay float32
// (cross-entropy runs in float32); and autocast adds what it must keep for the backward: the
// float16 copy of the input (saved by the first Linear for its weight gradient) and a float16
// copy of every weight whose input needs a gradient (saved for that input's gradient).
//
// Training: the same model from the same initial weights trains on a synthetic task in float32
// and with autocast + GradScaler. The scale doubles after growth_interval clean steps; at one
// step an inf is written into a gradient, and the scaler skips that step (the weights do not
// change) and halves the scale. Both runs converge. On the CPU a float16 matmul is computed in
// float32 and rounded, so the gain here is memory, not speed.
//
//   ./memgrad example b14 [--size N] [--device sim:0]
#include "examples/behaviours/b14_mixed_precision.h"

#include <any>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "engine/nn/functional.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"

namespace memgrad::examples {
namespace {

constexpr int64_t kIn = 32, kHidden = 256, kClasses = 16, kHiddenLayers = 3;
constexpr int64_t kGrowthInterval = 10;

int64_t allocated_on(Device device) { return static_cast<int64_t>(memory_allocated(device)); }

std::unique_ptr<nn::Sequential> make_model(Device device) {
  const nn::LinearOptions lo{true, device, kFloat32};
  auto model = std::make_unique<nn::Sequential>();
  int64_t in = kIn;
  for (int64_t i = 0; i < kHiddenLayers; ++i, in = kHidden) {
    model->push_back(std::make_shared<nn::Linear>(in, kHidden, lo));
    model->push_back(std::make_shared<nn::ReLU>());
  }
  model->push_back(std::make_shared<nn::Linear>(kHidden, kClasses, lo));
  return model;
}

// Sorts every tensor autograd saves into the ForwardKept categories (see the header). The
// batch (a multiple of 96) never equals another dimension, so shapes tell the categories apart.
class SavedCensus {
 public:
  SavedCensus(std::vector<Tensor> held, int64_t batch) : held_(std::move(held)), batch_(batch) {}

  void add(const Tensor& t) {
    if (!seen_.insert(t.impl()->storage_ptr().get()).second) return;
    for (const Tensor& h : held_) {
      if (t.shares_storage_with(h)) return;  // not new memory
    }
    const auto bytes = static_cast<int64_t>(t.storage().allocated_nbytes());
    const bool half = t.dtype() == kFloat16;
    if (t.sizes() == Shape{batch_, kHidden}) {
      kept_.hidden += bytes;
    } else if (t.sizes() == Shape{batch_, kClasses} && !half) {
      kept_.log_probs += bytes;
    } else if (t.sizes() == Shape{batch_, kIn} && half) {
      kept_.input_copy += bytes;
    } else if (half && is_weight_shape(t.sizes())) {
      kept_.weight_copies += bytes;
    } else {
      kept_.other += bytes;
    }
  }
  ForwardKept kept() const { return kept_; }

 private:
  bool is_weight_shape(const Shape& s) const {
    for (const Tensor& h : held_) {
      if (h.dim() == 2 && h.sizes() == s) return true;
    }
    return false;
  }
  std::vector<Tensor> held_;
  int64_t batch_;
  std::set<const void*> seen_;
  ForwardKept kept_;
};

ForwardKept forward_kept(nn::Sequential& model, const Tensor& x, const Tensor& target, bool amp,
                         Device device) {
  std::vector<Tensor> held = model.parameters();
  held.push_back(x);
  held.push_back(target);
  SavedCensus census(held, x.size(0));
  const int64_t before = allocated_on(device);
  Tensor loss;
  {
    autograd::ObserveSavedTensorsGuard hooks([&census](const Tensor& t) { census.add(t); });
    autograd::AutocastGuard autocast(amp);
    loss = nn::cross_entropy(model.forward(x), target);
  }  // leaving the autocast region frees the cached weight casts nobody saved
  ForwardKept kept = census.kept();
  kept.total = allocated_on(device) - before;
  kept.loss = static_cast<int64_t>(loss.storage().allocated_nbytes());
  return kept;
}

ForwardKeptExpected expected_kept(int64_t b) {
  ForwardKeptExpected e;
  e.fp32.hidden = kHiddenLayers * rounded(b * kHidden * 4);
  e.fp32.log_probs = rounded(b * kClasses * 4);
  e.fp32.loss = rounded(4);
  e.fp16 = e.fp32;
  e.fp16.hidden = kHiddenLayers * rounded(b * kHidden * 2);
  e.fp16.input_copy = rounded(b * kIn * 2);
  // Every Linear but the first (whose input, the data, needs no gradient) keeps its float16 weight.
  e.fp16.weight_copies =
      (kHiddenLayers - 1) * rounded(kHidden * kHidden * 2) + rounded(kClasses * kHidden * 2);
  for (ForwardKept* k : {&e.fp32, &e.fp16}) {
    k->total = k->hidden + k->log_probs + k->input_copy + k->weight_copies + k->loss;
  }
  return e;
}

}  // namespace

AutocastMemoryResult measure_autocast_memory(int64_t size, Device device) {
  AutocastMemoryResult r;
  r.batch = 384 * size;
  r.in = kIn;
  r.hidden = kHidden;
  r.classes = kClasses;
  r.layers = kHiddenLayers;
  manual_seed(0);
  const auto model = make_model(device);
  const Tensor x = randn({r.batch, kIn}, TensorOptions(kFloat32).with_device(device));
  const Tensor target = randint(0, kClasses, {r.batch}, TensorOptions(kInt64).with_device(device));
  r.expected = expected_kept(r.batch);
  r.fp32 = forward_kept(*model, x, target, false, device);
  r.fp16 = forward_kept(*model, x, target, true, device);
  for (int64_t b : {96 * size, 384 * size, 1536 * size}) {
    const Tensor xb = randn({b, kIn}, TensorOptions(kFloat32).with_device(device));
    const Tensor tb = randint(0, kClasses, {b}, TensorOptions(kInt64).with_device(device));
    const ForwardKeptExpected e = expected_kept(b);
    r.by_batch.push_back({b, forward_kept(*model, xb, tb, false, device).total,
                          forward_kept(*model, xb, tb, true, device).total, e.fp32.total,
                          e.fp16.total});
  }
  return r;
}

namespace {

struct TrainingData {
  Tensor x, labels;
};

// 512 samples labelled by a random linear teacher (argmax of x T).
TrainingData teacher_data(Device device) {
  manual_seed(1);
  const TensorOptions opts = TensorOptions(kFloat32).with_device(device);
  TrainingData d;
  d.x = randn({512, kIn}, opts);
  const Tensor teacher = randn({kIn, kClasses}, opts);
  d.labels = matmul(d.x, teacher).argmax(1);
  return d;
}

// One training run; fills `losses` and, with amp, the scaler events.
void train_run(MixedTrainingResult& r, const TrainingData& data, bool amp, int64_t batch,
               Device device, std::vector<double>& losses) {
  manual_seed(2);  // the same initial weights for both runs
  const auto model = make_model(device);
  const std::vector<Tensor> params = model->parameters();
  optim::Adam opt(params, {.lr = 3e-3});
  autograd::GradScaler scaler(
      {.init_scale = 256.0, .growth_interval = kGrowthInterval, .enabled = amp});
  const int64_t batches = data.x.size(0) / batch;
  for (int64_t step = 1; step <= r.steps; ++step) {
    const int64_t k = (step - 1) % batches;
    const Tensor xs = data.x.slice(0, k * batch, (k + 1) * batch);
    const Tensor ts = data.labels.slice(0, k * batch, (k + 1) * batch);
    opt.zero_grad();
    Tensor loss;
    {
      autograd::AutocastGuard autocast(amp);
      loss = nn::cross_entropy(model->forward(xs), ts);
    }
    losses.push_back(loss.item<double>());
    if (!amp) {
      loss.backward();
      opt.step();
      continue;
    }
    scaler.scale(loss).backward();
    ScalerEvent e;
    e.step = step;
    e.injected = step == r.inject_step;
    if (e.injected) params[0].grad().view({-1})[0].fill_(INFINITY);
    const Tensor snapshot = params[0].detach().clone();
    e.scale_before = scaler.get_scale();
    e.stepped = scaler.step(opt);
    scaler.update();
    e.scale_after = scaler.get_scale();
    e.weights_kept = equal(params[0].detach(), snapshot);
    if (!e.stepped || e.scale_after != e.scale_before) r.events.push_back(e);
    r.skipped += e.stepped ? 0 : 1;
  }
}

double mean_of_last(const std::vector<double>& v, size_t n) {
  n = std::min(n, v.size());
  return std::accumulate(v.end() - static_cast<std::ptrdiff_t>(n), v.end(), 0.0) /
         static_cast<double>(n);
}

}  // namespace

MixedTrainingResult train_mixed_precision(int64_t size, Device device, int64_t steps,
                                          int64_t inject_step) {
  MixedTrainingResult r;
  r.steps = steps;
  r.growth_interval = kGrowthInterval;
  r.inject_step = inject_step;
  const TrainingData data = teacher_data(device);
  const int64_t batch = 64 * std::min<int64_t>(size, 8);
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  train_run(r, data, false, batch, device, r.losses32);
  r.ms32 = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  start = Clock::now();
  train_run(r, data, true, batch, device, r.losses16);
  r.ms16 = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  r.final32 = mean_of_last(r.losses32, 10);
  r.final16 = mean_of_last(r.losses16, 10);
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B14", "mixed precision: float16 autocast and GradScaler",
    "seeds 001 (section 9b) and 003 (section 7)",
    "Training with 16-bit floats where it is safe and 32-bit elsewhere (autocast, with a gradient "
    "scaler) makes training faster and lighter on memory while the model still reaches its "
    "accuracy."};

constexpr double kConvergedBelow = 0.5;  // the initial loss is about ln(16) = 2.77

void add_breakdown(MemoryReport& report, const char* mode, const ForwardKept& e,
                   const ForwardKept& m) {
  report.add(fmt::format("{}: hidden activations (ReLU outputs)", mode), e.hidden, m.hidden);
  report.add(fmt::format("{}: log-probabilities (cross-entropy, float32)", mode), e.log_probs,
             m.log_probs);
  report.add(fmt::format("{}: float16 copy of the input", mode), e.input_copy, m.input_copy);
  report.add(fmt::format("{}: float16 copies of weights", mode), e.weight_copies, m.weight_copies);
  report.add(fmt::format("{}: anything else saved", mode), e.other, m.other);
  report.add(fmt::format("{}: loss", mode), e.loss, m.loss);
  report.add(fmt::format("{}: total kept (allocator)", mode), e.total, m.total);
}

double percent(const KeptAtBatch& k) {
  return 100.0 * static_cast<double>(k.fp16) / static_cast<double>(k.fp32);
}

bool print_memory(const AutocastMemoryResult& m, const Device& device) {
  fmt::print(
      "MLP {} -> {} ({} layers, ReLU) -> {}, cross-entropy, on a ({}, {}) float32 batch on {}.\n\n",
      m.in, m.hidden, m.layers, m.classes, m.batch, m.in, device.str());
  MemoryReport report("What one forward keeps for backward (a pack hook sorts each saved tensor):");
  add_breakdown(report, "float32", m.expected.fp32, m.fp32);
  add_breakdown(report, "float16", m.expected.fp16, m.fp16);
  report.print();
  MemoryReport totals(
      "\nTotal kept by one forward at other batch sizes (the weight copies do not grow "
      "with the batch):");
  for (const KeptAtBatch& k : m.by_batch) {
    totals.add(fmt::format("batch {:>5}: float32", k.batch), k.expected_fp32, k.fp32);
    totals.add(fmt::format("batch {:>5}: float16 ({:.0f}% of float32)", k.batch,
                           100.0 * static_cast<double>(k.fp16) / static_cast<double>(k.fp32)),
               k.expected_fp16, k.fp16);
  }
  totals.print();
  return report.all_match() && totals.all_match();
}

bool print_training(const MixedTrainingResult& t) {
  fmt::print(
      "\nTraining from the same initial weights, {} Adam steps (lr 3e-3), GradScaler(init_scale "
      "256, growth_interval {}), an inf written into a gradient at step {}:\n",
      t.steps, t.growth_interval, t.inject_step);
  bool ok = true;
  for (const ScalerEvent& e : t.events) {
    fmt::print("  step {:>3}: scale {:g} -> {:g}, {}{}\n", e.step, e.scale_before, e.scale_after,
               e.stepped ? "stepped" : "step skipped", e.injected ? " (inf injected)" : "");
    if (!e.stepped) {
      fmt::print("            weights unchanged by the skipped step: {}\n",
                 e.weights_kept ? "yes" : "no");
      ok = ok && e.weights_kept;
    }
  }
  fmt::print("  loss at step 1: float32 {:.4f}, float16 {:.4f}\n", t.losses32.front(),
             t.losses16.front());
  fmt::print(
      "  mean loss of the last 10 steps: float32 {:.4f}, float16 {:.4f} (converged: below "
      "{:.1f})\n",
      t.final32, t.final16, kConvergedBelow);
  fmt::print(
      "  durations: float32 {:.1f} ms, float16 {:.1f} ms (on the CPU float16 matmuls run in "
      "float32 and round, so no speed-up is expected here)\n",
      t.ms32, t.ms16);
  return ok;
}

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const bool workspace_ok = take_cublas_workspace(device);
  const AutocastMemoryResult m = measure_autocast_memory(flags.size, device);
  const MixedTrainingResult t = train_mixed_precision(flags.size, device);
  bool ok = print_memory(m, device);
  ok = print_training(t) && ok;
  const bool grew = !t.events.empty() && t.events.front().stepped &&
                    t.events.front().scale_after == 2 * t.events.front().scale_before;
  bool backed_off = false;
  for (const ScalerEvent& e : t.events)
    backed_off = backed_off || (e.injected && !e.stepped && e.scale_after == e.scale_before / 2);
  ok = ok && grew && backed_off && t.final32 < kConvergedBelow && t.final16 < kConvergedBelow;
  print_conclusion(fmt::format(
      "under autocast the hidden activations took {} B instead of {} B, exactly half; the whole "
      "forward kept {} B vs {} B ({:.0f}%), because the log-probabilities stay float32 and "
      "autocast keeps {} B of float16 weight copies and a {} B float16 input copy for backward; "
      "as the weight copies do not grow with the batch, the ratio goes from {:.0f}% at batch {} "
      "to {:.0f}% at batch {}. The scale doubled after {} clean steps, the injected inf was {}, "
      "and both runs converged (final losses {:.3f} and {:.3f}).",
      with_commas(m.fp16.hidden), with_commas(m.fp32.hidden), with_commas(m.fp16.total),
      with_commas(m.fp32.total),
      100.0 * static_cast<double>(m.fp16.total) / static_cast<double>(m.fp32.total),
      with_commas(m.fp16.weight_copies), with_commas(m.fp16.input_copy),
      percent(m.by_batch.front()), m.by_batch.front().batch, percent(m.by_batch.back()),
      m.by_batch.back().batch, t.growth_interval,
      backed_off ? "handled (step skipped, weights unchanged, scale halved)" : "NOT handled",
      t.final32, t.final16));
  return workspace_ok && ok ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b14_mixed_precision_main() is its main() (a generated file calls it).
int b14_mixed_precision_main(int argc, char** argv) {
  return run_behaviour(argc, argv, kInfo, body);
}

}  // namespace memgrad::examples
