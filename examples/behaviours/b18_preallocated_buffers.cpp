// B18 -- preallocated, reused buffers (seed 003 §9).
//
// The same step, softmax(exp((x @ w + b) * s)) added into a running sum, is run out of place
// (each op allocates its result: 5 allocations per step, every step) and with the out= variants
// writing into two buffers that are reused from step to step (ping-pong). The buffers start
// empty, so the first step sizes them (2 allocations); after that warm-up a step allocates
// nothing at all. The allocator's cumulative allocation count and bytes are read around each
// step, so these are counts, not estimates.
//
//   ./memgrad example b18 [--size N] [--device sim:0]
#include "examples/behaviours/b18_preallocated_buffers.h"

#include <fmt/format.h>

#include "engine/memgrad.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"

namespace memgrad::examples {
namespace {

constexpr int64_t kFeatures = 128;
constexpr int kOpsPerStep = 5;  // mm, add, mul, exp, softmax

// The step's inputs, made once.
struct Inputs {
  Tensor x, w, b, s;
};

// Cumulative allocation count and bytes of `device`'s allocator.
struct Counters {
  int64_t allocations, bytes;
};

Counters counters(Device device) {
  const MemoryStats s = memory_stats(device);
  return {s.allocation.all().allocated, s.allocated_bytes.all().allocated};
}

void out_of_place_step(const Inputs& in, Tensor& sum) {
  Tensor h = mm(in.x, in.w);
  h = add(h, in.b);
  h = mul(h, in.s);
  h = exp(h);
  h = softmax(h, 1);
  sum.add_(h);
}

// The same step into two reused buffers: each op reads one and writes the other.
void reused_step(const Inputs& in, Tensor& sum, Tensor& a, Tensor& b) {
  mm_out(a, in.x, in.w);
  add_out(b, a, in.b);
  mul_out(a, b, in.s);
  exp_out(b, a);
  softmax_out(a, b, 1);
  sum.add_(a);
}

}  // namespace

BufferLoopResult measure_buffer_reuse(int64_t size, Device device, int steps) {
  BufferLoopResult r;
  r.rows = 64 * size;
  r.features = kFeatures;
  r.tensor_bytes = rounded(r.rows * kFeatures * 4);
  r.expected_out_of_place_allocs = kOpsPerStep;
  r.expected_warmup_allocs = 2;
  const TensorOptions f32 = TensorOptions(kFloat32).with_device(device);
  Generator g(18);
  const Inputs in{randn({r.rows, kFeatures}, f32, &g),
                  randn({kFeatures, kFeatures}, f32, &g) * 0.05, randn({kFeatures}, f32, &g),
                  rand({kFeatures}, f32, &g)};

  Tensor sum_out_of_place = zeros({r.rows, kFeatures}, f32);
  for (int k = 0; k < steps; ++k) {
    const Counters before = counters(device);
    out_of_place_step(in, sum_out_of_place);
    const Counters after = counters(device);
    r.out_of_place_allocs.push_back(after.allocations - before.allocations);
    r.out_of_place_bytes.push_back(after.bytes - before.bytes);
  }

  Tensor sum_reused = zeros({r.rows, kFeatures}, f32);
  Tensor a = empty({0}, f32), b = empty({0}, f32);
  for (int k = 0; k < steps; ++k) {
    const Counters before = counters(device);
    reused_step(in, sum_reused, a, b);
    const Counters after = counters(device);
    r.reused_allocs.push_back(after.allocations - before.allocations);
    r.reused_bytes.push_back(after.bytes - before.bytes);
  }
  r.same_values = sum_out_of_place.to_vector<float>() == sum_reused.to_vector<float>();
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B18", "preallocated, reused buffers", "seed 003 (section 9)",
    "Allocating the tensors a loop needs once and reusing them avoids allocating and freeing "
    "memory at every iteration, which also limits fragmentation."};

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const bool workspace_ok = take_cublas_workspace(device);
  const int steps = 5;
  const BufferLoopResult r = measure_buffer_reuse(flags.size, device, steps);
  fmt::print(
      "step: softmax(exp((x @ w + b) * s)) added into a running sum; x is ({}, {}) float32 "
      "on {}\n\n",
      r.rows, r.features, device.str());
  fmt::print("  step   allocations out of place   allocations with out= buffers\n");
  bool counts_ok = true;
  for (int k = 0; k < steps; ++k) {
    const int64_t want = k == 0 ? r.expected_warmup_allocs : 0;
    counts_ok = counts_ok && r.out_of_place_allocs[k] == r.expected_out_of_place_allocs &&
                r.reused_allocs[k] == want;
    fmt::print("  {:>4}   {:>3} (expected {})           {:>3} (expected {})\n", k + 1,
               r.out_of_place_allocs[k], r.expected_out_of_place_allocs, r.reused_allocs[k], want);
  }
  fmt::print("\n");
  MemoryReport report("Bytes the allocator handed out per step:");
  for (int k = 0; k < steps; ++k) {
    report.add(
        fmt::format("out of place, step {} ({} results)", k + 1, r.expected_out_of_place_allocs),
        r.expected_out_of_place_allocs * r.tensor_bytes, r.out_of_place_bytes[k]);
  }
  report.add("out= buffers, step 1 (warm-up: both buffers sized)",
             r.expected_warmup_allocs * r.tensor_bytes, r.reused_bytes[0]);
  for (int k = 1; k < steps; ++k) {
    report.add(fmt::format("out= buffers, step {}", k + 1), 0, r.reused_bytes[k]);
  }
  report.print();
  fmt::print("\nboth loops computed bit-identical sums: {}\n", r.same_values ? "yes" : "NO");
  int64_t after_warmup = 0;
  for (int k = 1; k < steps; ++k) {
    after_warmup += r.reused_allocs[k];
  }
  print_conclusion(fmt::format(
      "out of place, every step made {} allocations ({} each); with reused out= buffers the first "
      "step made {} and the {} steps after it {} in total.",
      r.out_of_place_allocs.back(), human_bytes(r.tensor_bytes), r.reused_allocs.front(), steps - 1,
      after_warmup));
  return workspace_ok && report.all_match() && counts_ok && r.same_values ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b18_preallocated_buffers_main() is its main() (a generated file calls it).
int b18_preallocated_buffers_main(int argc, char** argv) {
  return run_behaviour(argc, argv, kInfo, body);
}

}  // namespace memgrad::examples
