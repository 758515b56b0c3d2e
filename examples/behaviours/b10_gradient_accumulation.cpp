// B10 -- gradient accumulation and zero_grad (seeds 001 §4, 002 example 2, 003 §5).
//
// Three measurements on a small MLP with a cross-entropy loss:
//   1. backward twice without zero_grad: the second adds into the same .grad tensors in place
//      (every gradient is exactly doubled, 0 new bytes);
//   2. one batch of B samples vs N micro-batches of B / N with loss / N each: the gradients agree
//      to float rounding, and each micro-batch forward keeps 1/N of the activations;
//   3. zero_grad(set_to_none = false) zeroes the gradients and keeps their memory;
//      zero_grad(set_to_none = true) frees exactly their bytes.
//
//   ./memgrad example b10 [--size N] [--device sim:0] [--micro-batches N]
#include "examples/behaviours/b10_gradient_accumulation.h"

#include <algorithm>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "engine/nn/functional.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"

namespace memgrad::examples {
namespace {

constexpr int64_t kIn = 64, kHidden = 256, kClasses = 16;

int64_t allocated_on(Device device) { return static_cast<int64_t>(memory_allocated(device)); }

std::vector<Tensor> grads_of(const nn::Module& model) {
  std::vector<Tensor> grads;
  for (const Tensor& p : model.parameters()) grads.push_back(p.grad().clone());
  return grads;
}

// Bytes one forward keeps for backward with a batch of b: two hidden activations (each ReLU
// output, saved by the ReLU and by the next Linear), the log-probabilities the cross-entropy
// saves, and the 0-d loss. The logits are freed once the loss is computed.
int64_t expected_kept(int64_t b) {
  return 2 * rounded(b * kHidden * 4) + rounded(b * kClasses * 4) + rounded(4);
}

// Part 2: the peak and kept bytes of one big batch or of `n` micro-batches (n = 1: one batch).
void run_batches(nn::Sequential& model, const Tensor& x, const Tensor& target, int64_t n,
                 Device device, int64_t& kept, int64_t& peak) {
  model.zero_grad(/*set_to_none=*/false);
  const int64_t base = allocated_on(device);
  reset_peak_memory_stats(device);
  const int64_t m = x.size(0) / n;
  for (int64_t k = 0; k < n; ++k) {
    const Tensor xs = x.slice(0, k * m, (k + 1) * m);  // views: no copy of the data
    const Tensor ts = target.slice(0, k * m, (k + 1) * m);
    Tensor loss = nn::cross_entropy(model.forward(xs), ts);
    if (n > 1) loss = loss / static_cast<double>(n);
    if (k == 0) kept = allocated_on(device) - base;
    loss.backward();
  }
  peak = static_cast<int64_t>(max_memory_allocated(device)) - base;
}

}  // namespace

AccumulationResult measure_accumulation(int64_t size, Device device, int64_t micro_batches) {
  AccumulationResult r;
  r.batch = 256 * size;
  r.micro_batches = micro_batches;
  r.micro_batch = r.batch / micro_batches;
  const nn::LinearOptions lo{true, device, kFloat32};
  manual_seed(0);
  nn::Sequential model(
      {std::make_shared<nn::Linear>(kIn, kHidden, lo), std::make_shared<nn::ReLU>(),
       std::make_shared<nn::Linear>(kHidden, kHidden, lo), std::make_shared<nn::ReLU>(),
       std::make_shared<nn::Linear>(kHidden, kClasses, lo)});
  for (const Tensor& p : model.parameters())
    r.grad_bytes += rounded(static_cast<int64_t>(p.nbytes()));
  const TensorOptions opts = TensorOptions(kFloat32).with_device(device);
  const Tensor x = randn({r.batch, kIn}, opts);
  const Tensor target = randint(0, kClasses, {r.batch}, TensorOptions(kInt64).with_device(device));

  // 1. Two backward calls on the first micro-batch.
  const Tensor x0 = x.slice(0, 0, r.micro_batch), t0 = target.slice(0, 0, r.micro_batch);
  nn::cross_entropy(model.forward(x0), t0).backward();
  const std::vector<Tensor> first = grads_of(model);
  const int64_t before_second = allocated_on(device);
  nn::cross_entropy(model.forward(x0), t0).backward();
  r.second_backward_bytes = allocated_on(device) - before_second;
  r.doubled_exactly = true;
  const std::vector<Tensor> params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    r.doubled_exactly = r.doubled_exactly && equal(params[i].grad(), first[i] * 2.0);
  }

  // 2. One big batch, then the same samples as micro-batches.
  r.expected_kept_big = expected_kept(r.batch);
  r.expected_kept_micro = expected_kept(r.micro_batch);
  run_batches(model, x, target, 1, device, r.kept_big, r.peak_big);
  const std::vector<Tensor> big = grads_of(model);
  run_batches(model, x, target, micro_batches, device, r.kept_micro, r.peak_micro);
  r.allclose = true;
  for (size_t i = 0; i < params.size(); ++i) {
    r.max_abs_diff =
        std::max(r.max_abs_diff, (params[i].grad() - big[i]).abs().max().item<double>());
    r.allclose = r.allclose && allclose(params[i].grad(), big[i], 1e-5, 1e-6);
  }

  // 3. zero_grad both ways.
  int64_t before = allocated_on(device);
  model.zero_grad(/*set_to_none=*/false);
  r.zero_grad_keep_bytes = allocated_on(device) - before;
  r.zeros_after_keep = true;
  for (const Tensor& p : params)
    r.zeros_after_keep = r.zeros_after_keep && p.grad().abs().max().item<double>() == 0.0;
  before = allocated_on(device);
  model.zero_grad(/*set_to_none=*/true);
  r.zero_grad_none_bytes = allocated_on(device) - before;
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B10", "gradient accumulation and zero_grad",
    "seeds 001 (section 4), 002 (example 2), 003 (section 5)",
    "backward() adds into the existing gradients; summing the gradients of several small batches "
    "(each loss divided by their number) stands in for one large batch while only a small batch's "
    "graph is alive at a time; zero_grad() resets the gradients between steps. 001 adds that "
    "accumulating gradients makes memory grow."};

int64_t micro_flag = 4;

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const AccumulationResult r = measure_accumulation(flags.size, device, micro_flag);
  fmt::print(
      "MLP {} -> {} -> {} -> {} (ReLU), cross-entropy, float32 on {}; batch {} = {} "
      "micro-batches of {}.\n\n",
      kIn, kHidden, kHidden, kClasses, device.str(), r.batch, r.micro_batches, r.micro_batch);
  MemoryReport acc("1. backward twice on the same micro-batch, no zero_grad in between:");
  acc.add("bytes allocated by the second backward (adds in place)", 0, r.second_backward_bytes);
  acc.print();
  fmt::print("  every .grad is exactly twice the first backward's: {}\n",
             r.doubled_exactly ? "yes" : "no");

  MemoryReport batches(fmt::format(
      "\n2. one batch of {} vs {} micro-batches (loss / {}), above parameters, gradients and data:",
      r.batch, r.micro_batches, r.micro_batches));
  batches.add(fmt::format("kept by the forward of the batch of {}", r.batch), r.expected_kept_big,
              r.kept_big);
  batches.add(fmt::format("kept by the forward of one micro-batch of {}", r.micro_batch),
              r.expected_kept_micro, r.kept_micro);
  batches.note("peak during forward + backward, one batch", r.peak_big);
  batches.note(fmt::format("peak during forward + backward, {} micro-batches", r.micro_batches),
               r.peak_micro);
  batches.print();
  fmt::print("  gradients: max |micro - big| = {:.2e}, allclose(rtol 1e-5, atol 1e-6): {}\n",
             r.max_abs_diff, r.allclose ? "yes" : "no");

  MemoryReport zero("\n3. zero_grad, allocated change:");
  zero.add("zero_grad(set_to_none=false): keeps the gradients", 0, r.zero_grad_keep_bytes);
  zero.add("zero_grad(set_to_none=true): frees every gradient", -r.grad_bytes,
           r.zero_grad_none_bytes);
  zero.print();
  fmt::print("  after zero_grad(false) every gradient is 0: {}\n",
             r.zeros_after_keep ? "yes" : "no");

  const bool ok = acc.all_match() && batches.all_match() && zero.all_match() && r.doubled_exactly &&
                  r.allclose && r.zeros_after_keep;
  const std::string second =
      r.second_backward_bytes == 0 && r.doubled_exactly
          ? "a second backward added exactly into the existing gradients with 0 new bytes, so "
            "accumulating does not make memory grow (contrary to 001 section 4)"
          : fmt::format("the second backward allocated {} B", with_commas(r.second_backward_bytes));
  print_conclusion(fmt::format(
      "{}; {} micro-batches gave the big batch's gradients (max difference {:.1e}, float "
      "rounding) while each forward kept {} B instead of {} B ({} B of activations instead of {} "
      "B) and the peak fell from {} B to {} B; zero_grad(set_to_none=true) freed {} B of "
      "gradients, zero_grad(false) freed {} B.",
      second, r.micro_batches, r.max_abs_diff, with_commas(r.kept_micro), with_commas(r.kept_big),
      with_commas(r.kept_micro - 512), with_commas(r.kept_big - 512), with_commas(r.peak_big),
      with_commas(r.peak_micro), with_commas(-r.zero_grad_none_bytes),
      with_commas(-r.zero_grad_keep_bytes)));
  return ok ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b10_gradient_accumulation_main() is its main() (a generated file calls it).
int b10_gradient_accumulation_main(int argc, char** argv) {
  ExtraFlags extra;
  extra.one_of("--micro-batches", micro_flag, "Number of micro-batches (divides 256)",
               {1, 2, 4, 8, 16, 32, 64});
  return run_behaviour(argc, argv, kInfo, body, extra);
}

}  // namespace memgrad::examples
