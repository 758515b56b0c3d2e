// B13 -- gradient checkpointing recomputes to save memory (seed 001 §9a).
//
// n blocks of Linear + ReLU run forward and backward plainly and under checkpoint_sequential
// with s segments (PyTorch's split: s - 1 checkpointed segments of k = n / s blocks, a plain last
// segment of L = n - (s - 1) k). Before each run the gradients exist already (zeroed in place),
// so what is measured above the baseline is activations and gradient temporaries only. With one
// activation A = batch x width x 4 bytes, a weight gradient G and a bias gradient b, the model:
//   kept after the forward: the s - 1 segment boundaries and the L activations of the plain
//     segment (a block keeps only its ReLU output): (s - 1 + L) A;
//   peak, backward of the plain segment, at its top Linear: those, the incoming gradient of its
//     output, the gradient of its input, G and b, and the 0-d loss: (s + L + 1) A + G + b + 512;
//   peak, recomputing the last checkpointed segment: the s - 2 boundaries below it, the output y
//     (held by the caller), the gradient arriving at the segment, its k recomputed activations,
//     then the same two gradients, G and b: (s + k + 2) A + G + b + 512.
// The forward's own peak, (s + L) A, is always below the backward's. A block counts its calls,
// so the extra compute is the number of Linear forwards: n + (s - 1) k; the wall-clock time of
// forward + backward is shown too (the fastest of 3 runs).
//
//   ./memgrad example b13 [--size N] [--device sim:0] [--layers N]
#include "examples/behaviours/b13_checkpointing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
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

constexpr int64_t kWidth = 256;

int64_t allocated_on(Device device) { return static_cast<int64_t>(memory_allocated(device)); }

// Linear + ReLU that counts how many times it ran forward (recomputations included).
class CountedBlock final : public nn::UnaryModule {
 public:
  CountedBlock(Device device, int64_t* calls)
      : linear_(register_module(
            "linear", std::make_shared<nn::Linear>(kWidth, kWidth,
                                                   nn::LinearOptions{true, device, kFloat32}))),
        calls_(calls) {}
  Tensor forward(const Tensor& x) override {
    ++*calls_;
    return relu_.forward(linear_->forward(x));
  }
  std::string name() const override { return "CountedBlock"; }

 private:
  std::shared_ptr<nn::Linear> linear_;
  nn::ReLU relu_;
  int64_t* calls_;
};

using Blocks = std::vector<std::shared_ptr<nn::UnaryModule>>;

// The expectations of the file comment for s segments of n blocks.
void expect(CheckpointRow& row, int64_t n, int64_t act) {
  const int64_t s = row.segments, k = n / s, last = n - (s - 1) * k;
  const int64_t grads = rounded(kWidth * kWidth * 4) + rounded(kWidth * 4) + rounded(4);
  row.kept_expected = (s - 1 + last) * act;
  int64_t peak_acts = s + last + 1;
  if (s > 1) peak_acts = std::max(peak_acts, s + k + 2);
  row.peak_expected = peak_acts * act + grads;
  row.linear_forwards_expected = n + (s - 1) * k;
  row.sizes.clear();
  for (int64_t i = 0; i < s; ++i) {
    if (i > 0) row.sizes += '+';
    row.sizes += std::to_string(i + 1 < s ? k : last);
  }
}

std::vector<Tensor> gradients(const Blocks& blocks) {
  std::vector<Tensor> grads;
  for (const auto& b : blocks) {
    for (const Tensor& p : b->parameters()) grads.push_back(p.grad().clone());
  }
  return grads;
}

// One forward + backward with s segments (1: plain), measured.
void run(CheckpointRow& row, const Blocks& blocks, const Tensor& x, Device device,
         const int64_t& calls) {
  for (const auto& b : blocks) b->zero_grad(/*set_to_none=*/false);
  const int64_t base = allocated_on(device);
  const int64_t calls_before = calls;
  reset_peak_memory_stats(device);
  const auto start = std::chrono::steady_clock::now();
  Tensor y;
  if (row.segments == 1) {
    y = x;
    for (const auto& b : blocks) y = b->forward(y);
  } else {
    y = autograd::checkpoint_sequential(blocks, row.segments, x);
  }
  row.kept_measured = allocated_on(device) - base;
  y.sum().backward();
  row.milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  row.peak_measured = static_cast<int64_t>(max_memory_allocated(device)) - base;
  row.linear_forwards = calls - calls_before;
}

}  // namespace

CheckpointResult measure_checkpointing(int64_t size, Device device, int64_t layers,
                                       std::vector<int64_t> segments, int64_t repeats) {
  CheckpointResult r;
  r.layers = layers;
  r.batch = 64 * size;
  r.width = kWidth;
  r.activation_bytes = rounded(r.batch * kWidth * 4);
  if (segments.empty()) segments = {1, 2, 3, 4, 6, 8, layers};
  std::sort(segments.begin(), segments.end());
  segments.erase(std::unique(segments.begin(), segments.end()), segments.end());
  std::erase_if(segments, [&](int64_t s) { return s < 1 || s > layers; });
  if (segments.empty() || segments.front() != 1) segments.insert(segments.begin(), 1);

  manual_seed(0);
  int64_t calls = 0;
  Blocks blocks;
  for (int64_t i = 0; i < layers; ++i)
    blocks.push_back(std::make_shared<CountedBlock>(device, &calls));
  const Tensor x = randn({r.batch, kWidth}, TensorOptions(kFloat32).with_device(device));
  {  // warm-up: allocates every gradient once, so the runs below only zero them in place
    Tensor y = x;
    for (const auto& b : blocks) y = b->forward(y);
    y.sum().backward();
  }
  std::vector<Tensor> plain;
  for (int64_t s : segments) {
    CheckpointRow row;
    row.segments = s;
    expect(row, layers, r.activation_bytes);
    run(row, blocks, x, device, calls);
    for (int64_t rep = 1; rep < repeats; ++rep) {  // timing only: keep the fastest
      CheckpointRow again = row;
      run(again, blocks, x, device, calls);
      row.milliseconds = std::min(row.milliseconds, again.milliseconds);
    }
    if (s == 1) plain = gradients(blocks);
    const std::vector<Tensor> now = gradients(blocks);
    row.grads_equal = true;
    for (size_t i = 0; i < now.size(); ++i)
      row.grads_equal = row.grads_equal && equal(now[i], plain[i]);
    r.rows.push_back(row);
  }
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B13", "gradient checkpointing recomputes to save memory", "seed 001 (section 9a)",
    "Checkpointing keeps fewer intermediate results and recomputes them during the backward pass, "
    "lowering memory at the price of extra computation."};

int64_t layers_flag = 16;

// The compute table; returns whether every count matched and every gradient was bit-exact.
bool print_compute(const CheckpointResult& r) {
  const auto act = static_cast<double>(r.activation_bytes);
  fmt::print("\n  {:>8}  {:>10}  {:>10}  {:>15}  {:>18}  {}\n", "segments", "kept (x A)",
             "peak (x A)", "Linear forwards", "gradients vs plain", "time (fwd + bwd)");
  bool ok = true;
  for (const CheckpointRow& row : r.rows) {
    const bool counted = row.linear_forwards == row.linear_forwards_expected;
    ok = ok && counted && row.grads_equal;
    // The time comes last and unpadded: the docs check masks durations, not their alignment.
    fmt::print("  {:>8}  {:>10.2f}  {:>10.2f}  {:>9} ({:>3})  {:>18}  {:.1f} ms\n", row.segments,
               static_cast<double>(row.kept_measured) / act,
               static_cast<double>(row.peak_measured) / act, row.linear_forwards,
               counted ? "ok" : "NO", row.grads_equal ? "bit-exact" : "DIFFERENT",
               row.milliseconds);
  }
  return ok;
}

std::string conclusion(const CheckpointResult& r) {
  const CheckpointRow& plain = r.rows.front();
  const CheckpointRow& all = r.rows.back();
  const CheckpointRow* best = &plain;
  for (const CheckpointRow& row : r.rows) {
    if (row.peak_measured < best->peak_measured) best = &row;
  }
  std::vector<std::string> tied;  // every segment count that reached the lowest peak
  for (const CheckpointRow& row : r.rows) {
    if (row.peak_measured == best->peak_measured) tied.push_back(std::to_string(row.segments));
  }
  std::string lowest = tied.back();
  if (tied.size() > 1) {
    lowest = fmt::format("{} and {}", fmt::join(tied.begin(), tied.end() - 1, ", "), tied.back());
  }
  const auto pct = [](int64_t a, int64_t b) {
    return 100.0 * static_cast<double>(a) / static_cast<double>(b);
  };
  std::string text = fmt::format(
      "the lowest peak, {} B ({:.0f}% of the plain run's {} B), came with {} segments, next to "
      "sqrt({}) = {:.1f}; {} segments cost {} Linear forwards instead of {} (+{:.0f}%), and every "
      "run's gradients were bit-exact with the plain run.",
      with_commas(best->peak_measured), pct(best->peak_measured, plain.peak_measured),
      with_commas(plain.peak_measured), lowest, r.layers, std::sqrt(static_cast<double>(r.layers)),
      best->segments, best->linear_forwards, plain.linear_forwards,
      pct(best->linear_forwards - plain.linear_forwards, plain.linear_forwards));
  if (all.segments == r.layers && all.kept_measured == plain.kept_measured) {
    text += fmt::format(
        " One segment per block ({} segments) keeps as much as the plain run, since a Linear + "
        "ReLU block keeps only its output, which is exactly the boundary a checkpoint keeps; its "
        "peak was {} B ({} the plain run's).",
        all.segments, with_commas(all.peak_measured),
        all.peak_measured > plain.peak_measured ? "above" : "not below");
  }
  return text;
}

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const CheckpointResult r = measure_checkpointing(flags.size, device, layers_flag);
  fmt::print(
      "n = {} blocks of Linear({w}, {w}) + ReLU on a float32 ({}, {w}) batch on {}; one "
      "activation A = {} B; loss = y.sum(); times are the fastest of 3 runs.\n\n",
      r.layers, r.batch, device.str(), with_commas(r.activation_bytes), fmt::arg("w", r.width));
  MemoryReport report("Bytes above parameters, gradients and input:");
  for (const CheckpointRow& row : r.rows) {
    report.add(fmt::format("segments {:>2} ({}): kept after forward", row.segments, row.sizes),
               row.kept_expected, row.kept_measured);
    report.add(
        fmt::format("segments {:>2} ({}): peak, forward + backward", row.segments, row.sizes),
        row.peak_expected, row.peak_measured);
  }
  report.print();
  const bool ok = print_compute(r) && report.all_match();
  print_conclusion(conclusion(r));
  return ok ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b13_checkpointing_main() is its main() (a generated file calls it).
int b13_checkpointing_main(int argc, char** argv) {
  ExtraFlags extra;
  extra.integer("--layers", layers_flag, "Number of Linear + ReLU blocks", 2, 256);
  return run_behaviour(argc, argv, kInfo, body, extra);
}

}  // namespace memgrad::examples
