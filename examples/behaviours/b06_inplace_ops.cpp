// B6 -- in-place ops avoid copies but can break autograd (seeds 001 section 5, 003 section 3).
//
// x.add_(1) writes into x's own block: it allocates 0 bytes (x.add(1) allocates a new tensor)
// and bumps x's version counter once. That counter is how autograd notices misuse: a tensor saved
// for backward and then modified in place makes backward raise PyTorch's error naming the op,
// the shape and both versions; an in-place op on a leaf that requires grad raises at once. An
// in-place op on an intermediate result (w * 2 then add_) is fine and still allocates 0 bytes.
//
//   ./memgrad example b06 [--size N] [--device sim:0]
#include "examples/behaviours/b06_inplace_ops.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/autograd.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"

namespace memgrad::examples {
namespace {

int64_t allocated_now(Device device) { return static_cast<int64_t>(memory_allocated(device)); }

// x.add(1) against x.add_(1) on a tensor that needs no gradient.
void measure_add(InplaceResult& r, int64_t size, Device device) {
  Tensor x = zeros({256 * size, 1024}, TensorOptions(kFloat32).with_device(device));
  r.x_nbytes = rounded(static_cast<int64_t>(x.nbytes()));
  int64_t before = allocated_now(device);
  {
    const Tensor y = x.add(1);
    r.add_out_of_place = allocated_now(device) - before;
  }
  const void* data = x.data_ptr();
  r.version_before = x.version();
  before = allocated_now(device);
  x.add_(1);
  r.add_in_place = allocated_now(device) - before;
  r.version_after = x.version();
  r.same_data = x.data_ptr() == data;
}

// The three autograd cases on a small leaf w.
void measure_autograd(InplaceResult& r, int64_t size, Device device) {
  const TensorOptions options = TensorOptions(kFloat32).with_device(device);
  Tensor w = ones({2 * size, 3}, options);
  w.requires_grad_();
  try {
    Tensor b = w.sigmoid();  // saves its output b for backward
    b.mul_(2);               // ... which this overwrites: b's version 0 -> 1
    b.sum().backward();
  } catch (const AutogradError& e) {
    r.saved_error_raised = true;
    r.saved_error = e.what();
  }
  try {
    w.add_(1);
  } catch (const AutogradError& e) {
    r.leaf_error_raised = true;
    r.leaf_error = e.what();
  }
  {
    const NoGradGuard no_grad;  // how optimizers update parameters in place
    const int64_t before = allocated_now(device);
    w.add_(1);
    r.leaf_no_grad_add = allocated_now(device) - before;
  }
  Tensor h = w * 2;  // an intermediate result: in place on it is allowed
  const int64_t before = allocated_now(device);
  h.add_(1);  // d(h + 1)/dh = 1: the formula reads nothing, so nothing is saved
  r.non_leaf_add = allocated_now(device) - before;
  r.non_leaf_grad_fn = h.grad_fn_name();
  h.sum().backward();
  r.grad = w.grad().to_vector<double>();
}

}  // namespace

InplaceResult measure_inplace_ops(int64_t size, Device device) {
  InplaceResult r;
  measure_add(r, size, device);
  measure_autograd(r, size, device);
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B6", "in-place ops avoid copies but can break autograd",
    "seeds 001 (section 5) and 003 (section 3)",
    "In-place operations such as add_ change a tensor's data directly instead of making a copy, "
    "which saves memory, but used carelessly they cause autograd errors."};

bool all_equal(const std::vector<double>& values, double expected) {
  for (double v : values) {
    if (v != expected) return false;
  }
  return !values.empty();
}

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const InplaceResult r = measure_inplace_ops(flags.size, device);
  MemoryReport report(
      fmt::format("Bytes allocated on {} (x: float32 ({}, 1024), w: float32 "
                  "({}, 3) leaf requiring grad):",
                  device.str(), 256 * flags.size, 2 * flags.size));
  report.add("x.add(1)   (out of place: a new tensor)", r.x_nbytes, r.add_out_of_place);
  report.add("x.add_(1)  (in place)", 0, r.add_in_place);
  report.add("w.add_(1)  under NoGradGuard (allowed)", 0, r.leaf_no_grad_add);
  report.add("h = w * 2; h.add_(1)  (recorded for autograd)", 0, r.non_leaf_add);
  report.print();
  fmt::print("\nx.add_(1): version {} -> {}, same data pointer: {}\n", r.version_before,
             r.version_after, r.same_data ? "yes" : "no");
  fmt::print("\nb = w.sigmoid(); b.mul_(2); b.sum().backward() raised: {}\n  {}\n",
             r.saved_error_raised ? "yes" : "NO", r.saved_error);
  fmt::print("\nw.add_(1) with grad mode on raised: {}\n  {}\n", r.leaf_error_raised ? "yes" : "NO",
             r.leaf_error);
  fmt::print(
      "\nh = w * 2; h.add_(1): h.grad_fn = {}; after h.sum().backward(), w.grad = {} "
      "(expected all 2)\n",
      r.non_leaf_grad_fn, r.grad);

  const bool grads_ok = all_equal(r.grad, 2.0);
  const bool ok = report.all_match() && r.version_after == r.version_before + 1 && r.same_data &&
                  r.saved_error_raised && r.leaf_error_raised && grads_ok;
  print_conclusion(fmt::format(
      "add_ allocated {} B against {} B for add and bumped the version by {}; that version "
      "counter made backward {} after a saved tensor was overwritten, the leaf check {} the "
      "in-place op on w, and in place on the intermediate w * 2 gave {} gradients.",
      r.add_in_place, with_commas(r.add_out_of_place), r.version_after - r.version_before,
      r.saved_error_raised ? "raise" : "NOT raise",
      r.leaf_error_raised ? "refused" : "did NOT refuse", grads_ok ? "the correct" : "WRONG"));
  return ok ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b06_inplace_ops_main() is its main() (a generated file calls it).
int b06_inplace_ops_main(int argc, char** argv) { return run_behaviour(argc, argv, kInfo, body); }

}  // namespace memgrad::examples
