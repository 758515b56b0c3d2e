// B7 -- in-place softmax: a limited effect on peak memory (seed 000).
//
// softmax(x, 1) of a (rows, cols) float32 tensor is computed four ways and the peak allocated
// bytes above the start are compared with what the shapes and autograd's saving rules predict
// (N = rows x cols floats, R = rows floats, each rounded to the allocator's 512-byte blocks):
//   out of place:  the fused kernel allocates only its N-float output, no intermediates; with
//                  autograd the saved tensor is that same output, so nothing more.
//   in place:      x.sub_(x.amax({1}, true)); x.exp_(); x.div_(x.sum({1}, true)) allocates only
//                  the R-float row results, one at a time. With autograd (x = w * 1.0): amax
//                  keeps its R-float result saved, sum's R-float result is kept by div_, and
//                  div_ must clone x's N old values because its formula for the divisor's
//                  gradient reads them (autograd/seam.cpp: reads_self_for_others). And exp_ saved
//                  its output, which div_ then overwrites: backward raises.
//
//   ./memgrad example b07 [--size N] [--device sim:0]
#include "examples/behaviours/b07_inplace_softmax.h"

#include <cstdlib>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"

namespace memgrad::examples {
namespace {

int64_t allocated_now(Device device) { return static_cast<int64_t>(memory_allocated(device)); }
int64_t peak_now(Device device) { return static_cast<int64_t>(max_memory_allocated(device)); }

// The article's in-place sequence.
void softmax_in_place(Tensor& x) {
  x.sub_(x.amax({1}, /*keepdim=*/true));
  x.exp_();
  x.div_(x.sum({1}, /*keepdim=*/true));
}

double max_error(const Tensor& result, const Tensor& reference) {
  const NoGradGuard no_grad;
  return (result - reference).abs().max().item<double>();
}

// Runs `compute` (which returns the softmax) on a fresh x, measuring peak and held bytes. With
// autograd, x = w * 1.0 for a leaf w (w * 1.0 saves nothing), and backward is attempted after.
SoftmaxCase run_case(SoftmaxCase c, const Tensor& input, const Tensor& reference,
                     Tensor (*compute)(Tensor& x)) {
  const Device device = input.device();
  Tensor w = input.clone();
  Tensor x = w;
  if (c.autograd) {
    w.requires_grad_();
    x = w * 1.0;
  } else {
    x = w.clone();  // the same start as with autograd: w and x both live
  }
  reset_peak_memory_stats(device);
  const int64_t start = allocated_now(device);
  Tensor result = compute(x);
  c.peak = peak_now(device) - start;
  c.held = allocated_now(device) - start;
  c.max_error = max_error(result, reference);
  if (c.autograd) {
    try {
      result.backward(ones_like(result));
      c.backward_ran = true;
    } catch (const AutogradError& e) {
      c.backward_error = e.what();
    }
  }
  return c;
}

Tensor out_of_place(Tensor& x) { return x.softmax(1); }
Tensor in_place(Tensor& x) {
  softmax_in_place(x);
  return x;
}

}  // namespace

SoftmaxResult measure_inplace_softmax(int64_t size, Device device) {
  SoftmaxResult r;
  r.rows = 256 * size;
  r.cols = 1024;
  r.output_bytes = rounded(r.rows * r.cols * 4);
  r.row_bytes = rounded(r.rows * 4);
  const int64_t out = r.output_bytes, row = r.row_bytes;
  const Tensor input = randn({r.rows, r.cols}, TensorOptions(kFloat32).with_device(device));
  const Tensor reference = input.softmax(1);
  auto expect = [](std::string name, bool autograd, int64_t peak, int64_t held) {
    SoftmaxCase c;
    c.name = std::move(name);
    c.autograd = autograd;
    c.expected_peak = peak;
    c.expected_held = held;
    return c;
  };
  const Tensor& ref = reference;
  r.cases.push_back(
      run_case(expect("out of place, no autograd", false, out, out), input, ref, out_of_place));
  r.cases.push_back(run_case(expect("in place, no autograd", false, row, 0), input, ref, in_place));
  r.cases.push_back(
      run_case(expect("out of place, autograd", true, out, out), input, ref, out_of_place));
  // amax's saved result + sum's result (saved by div_) + div_'s clone of x's old values.
  r.cases.push_back(run_case(expect("in place, autograd", true, out + 2 * row, out + 2 * row),
                             input, reference, in_place));
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B7", "in-place softmax: limited effect on peak memory", "seed 000",
    "Doing softmax's steps in place does little for its memory use: the standard softmax is said "
    "to create intermediate tensors while exponentiating and normalising, and the input stays "
    "occupied either way."};

std::string conclusion(const SoftmaxResult& r) {
  const SoftmaxCase& oop = r.cases[0];
  const SoftmaxCase& ip = r.cases[1];
  const SoftmaxCase& oop_grad = r.cases[2];
  const SoftmaxCase& ip_grad = r.cases[3];
  const bool fused = oop.peak == r.output_bytes;
  return fmt::format(
      "out-of-place softmax peaked at {} B = {} its output (the article's intermediate tensors "
      "{}). Without autograd, in place peaked at {} B: {} B less, the output minus one row "
      "temporary. With autograd, in place peaked at {} B against {} B out of place ({} B {}), and "
      "its backward {}.",
      with_commas(oop.peak), fused ? "exactly" : "more than",
      fused ? "do not exist: the kernel is fused" : "exist", with_commas(ip.peak),
      with_commas(oop.peak - ip.peak), with_commas(ip_grad.peak), with_commas(oop_grad.peak),
      with_commas(std::abs(ip_grad.peak - oop_grad.peak)),
      ip_grad.peak > oop_grad.peak ? "more" : "less",
      ip_grad.backward_ran ? "ran" : "raised (exp_'s saved output was overwritten by div_)");
}

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const SoftmaxResult r = measure_inplace_softmax(flags.size, device);
  fmt::print(
      "softmax(x, 1) of a float32 ({}, {}) tensor on {}: N = {} floats ({} B), R = {} "
      "floats ({} B, rounded to 512 B)\n\n",
      r.rows, r.cols, device.str(), r.rows * r.cols, with_commas(r.output_bytes), r.rows,
      with_commas(r.row_bytes));
  MemoryReport report("Bytes above the start:");
  bool ok = true;
  for (const SoftmaxCase& c : r.cases) {
    report.add(fmt::format("{:<27} peak", c.name), c.expected_peak, c.peak);
    report.add(fmt::format("{:<27} held after", c.name), c.expected_held, c.held);
    ok = ok && c.max_error < 1e-5;
  }
  report.print();
  fmt::print("\nevery result equals softmax(x, 1) within 1e-5: {}\n", ok ? "yes" : "NO");
  for (const SoftmaxCase& c : r.cases) {
    if (!c.autograd) continue;
    fmt::print("{}: backward {}\n", c.name,
               c.backward_ran ? "ran" : fmt::format("raised:\n  {}", c.backward_error));
  }
  // The expected outcome: out of place trains, the in-place sequence cannot.
  ok = ok && r.cases[2].backward_ran && !r.cases[3].backward_ran;
  print_conclusion(conclusion(r));
  return report.all_match() && ok ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b07_inplace_softmax_main() is its main() (a generated file calls it).
int b07_inplace_softmax_main(int argc, char** argv) {
  return run_behaviour(argc, argv, kInfo, body);
}

}  // namespace memgrad::examples
