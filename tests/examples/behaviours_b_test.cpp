// Behaviours B8-B14 asserted on small sizes through the examples' own measurement code.
#include <doctest/doctest.h>

#include "engine/memgrad.h"
#include "examples/behaviours/b08_saved_activations.h"
#include "examples/behaviours/b09_no_grad.h"
#include "examples/behaviours/b10_gradient_accumulation.h"
#include "examples/behaviours/b11_freeing_references.h"
#include "examples/behaviours/b12_detach.h"
#include "examples/behaviours/b13_checkpointing.h"
#include "examples/behaviours/b14_mixed_precision.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using namespace memgrad::examples;

namespace {

void check_steps(const std::vector<ActivationStep>& steps) {
  for (const ActivationStep& s : steps) {
    CAPTURE(s.what);
    CHECK_EQ(s.measured, s.expected);
  }
}

void check_steps(const std::vector<ReferenceStep>& steps) {
  for (const ReferenceStep& s : steps) {
    CAPTURE(s.what);
    CHECK_EQ(s.measured, s.expected);
  }
}

}  // namespace

TEST_SUITE("examples") {
TEST_CASE("B8: each layer keeps one activation until backward frees it; retain_graph keeps all") {
  for (Device dev : memgrad::testing::devices_under_test()) {
    CAPTURE(dev.str());
    const int64_t n = 4;
    const SavedActivationsResult r = measure_saved_activations(1, dev, n);
    const int64_t act = r.activation_bytes;
    REQUIRE_EQ(act, 64 * 256 * 4);
    check_steps(r.forward);
    REQUIRE_EQ(r.forward.size(), static_cast<size_t>(2 * n + 1));
    for (int64_t i = 0; i < n; ++i) {
      CAPTURE(i);
      CHECK_EQ(r.forward[static_cast<size_t>(2 * i + 1)].measured,
               (i + 1) * act);  // after ReLU i+1
    }
    // Backward: one reading per hidden activation (gradients taken off), each exactly one
    // activation lower than the one before: the node that ran in between released it.
    check_steps(r.backward);
    REQUIRE_EQ(r.backward.size(), static_cast<size_t>(n - 1));
    for (size_t i = 1; i < r.backward.size(); ++i) {
      CHECK_EQ(r.backward[i - 1].measured - r.backward[i].measured, act);
    }
    CHECK_EQ(r.after_backward.measured, r.after_backward.expected);
    CHECK_EQ(r.after_backward.measured, act + 512 + r.grad_bytes);
    CHECK_EQ(r.retained.measured, r.retained.expected);
    CHECK_EQ(r.retained.measured - r.after_second_backward.measured, (n - 1) * act);
    CHECK_EQ(r.after_second_backward.measured, r.after_second_backward.expected);
    CHECK(r.second_backward_ran);
    CHECK(r.third_backward_error.find("backward through the graph a second time") !=
          std::string::npos);
  }
}

TEST_CASE("B9: the grad-mode peak exceeds the no_grad peak by exactly the saved activations") {
  for (Device dev : memgrad::testing::devices_under_test()) {
    CAPTURE(dev.str());
    const int64_t n = 5;
    const NoGradResult r = measure_no_grad(1, dev, n);
    const int64_t act = r.activation_bytes;
    CHECK_EQ(r.grad_mode.peak - r.no_grad.peak, (n - 1) * act);
    CHECK_EQ(r.grad_mode.kept, n * act);
    CHECK_EQ(r.no_grad.kept, act);  // only the output
    CHECK_EQ(r.no_grad.peak, 2 * act);
    CHECK(r.same_output);
  }
}

TEST_CASE("B10: accumulation adds in place; micro-batches match the big batch at 1/N activations") {
  for (Device dev : memgrad::testing::devices_under_test()) {
    CAPTURE(dev.str());
    const int64_t n = 4;
    const AccumulationResult r = measure_accumulation(1, dev, n);
    CHECK(r.doubled_exactly);
    CHECK_EQ(r.second_backward_bytes, 0);
    CHECK_EQ(r.kept_big, r.expected_kept_big);
    CHECK_EQ(r.kept_micro, r.expected_kept_micro);
    CHECK_EQ(r.kept_big - 512, n * (r.kept_micro - 512));  // activations scale with the batch
    CHECK_LT(r.peak_micro, r.peak_big);
    CHECK(r.allclose);
    CHECK_LT(r.max_abs_diff, 1e-5);
    CHECK_EQ(r.zero_grad_keep_bytes, 0);
    CHECK(r.zeros_after_keep);
    CHECK_EQ(r.zero_grad_none_bytes, -r.grad_bytes);
    CHECK_EQ(r.grad_bytes, (64 * 256 + 256 * 256 + 256 * 16) * 4 + 2 * 1024 + 512);
  }
}

TEST_CASE(
    "B11: the last reference frees at once; a view, a held loss and logged losses pin memory") {
  for (Device dev : memgrad::testing::devices_under_test()) {
    CAPTURE(dev.str());
    const int64_t steps = 3;
    const FreeingResult r = measure_freeing(1, dev, steps);
    check_steps(r.handles);
    CHECK_EQ(r.handles[1].measured, 0);  // t = Tensor() freed the block in that statement
    CHECK_EQ(r.handles[4].measured, r.tensor_bytes);  // pinned by a view
    CHECK_EQ(r.reserved_change_on_reset, 0);
    check_steps(r.graph);
    CHECK_EQ(r.graph[1].measured, 2 * r.activation_bytes + 512);
    check_steps(r.eval_tensors);
    check_steps(r.eval_items);
    check_steps(r.train_tensors);
    check_steps(r.train_items);
    CHECK_EQ(r.eval_tensors.back().measured, steps * r.graph_bytes);
    CHECK_EQ(r.eval_items.back().measured, 0);
    CHECK_EQ(r.train_tensors.back().measured, steps * 512);
    CHECK_EQ(r.train_items.back().measured, 0);
  }
}

TEST_CASE("B12: detach adds 0 bytes, aliases, shares the version, and lets the graph go") {
  for (Device dev : memgrad::testing::devices_under_test()) {
    CAPTURE(dev.str());
    const int64_t n = 3;
    const DetachResult r = measure_detach(1, dev, n);
    CHECK_EQ(r.kept_by_output, n * r.activation_bytes);
    CHECK_EQ(r.detach_bytes, 0);
    CHECK(r.shares_storage);
    CHECK_EQ(r.data_offset, 0);
    CHECK_FALSE(r.d_requires_grad);
    CHECK(r.d_is_leaf);
    CHECK_EQ(r.y_version_after, r.y_version_before + 1);
    CHECK_EQ(r.kept_by_detached, r.activation_bytes);
  }
}

TEST_CASE("B13: checkpointing lowers the peak as modelled, recomputes, and keeps gradients exact") {
  for (Device dev : memgrad::testing::devices_under_test()) {
    CAPTURE(dev.str());
    const CheckpointResult r = measure_checkpointing(1, dev, 8, {1, 2, 3, 4, 8});
    REQUIRE_EQ(r.rows.size(), 5);
    const CheckpointRow& plain = r.rows.front();
    CHECK_EQ(plain.kept_measured, 8 * r.activation_bytes);
    for (const CheckpointRow& row : r.rows) {
      CAPTURE(row.segments);
      CHECK_EQ(row.kept_measured, row.kept_expected);
      CHECK_EQ(row.peak_measured, row.peak_expected);
      CHECK_EQ(row.linear_forwards, row.linear_forwards_expected);
      CHECK(row.grads_equal);
      if (row.segments > 1 && row.segments < 8) CHECK_LT(row.peak_measured, plain.peak_measured);
    }
    CHECK_EQ(r.rows[2].linear_forwards, 8 + 2 * 2);  // 3 segments of 2, 2, 4: two recomputed
    CHECK_GT(r.rows.back().peak_measured, plain.peak_measured);  // one block per segment
  }
}

TEST_CASE("B14: autocast halves the hidden activations and adds its float16 copies") {
  for (Device dev : memgrad::testing::devices_under_test()) {
    CAPTURE(dev.str());
    const AutocastMemoryResult m = measure_autocast_memory(1, dev);
    CHECK_EQ(2 * m.fp16.hidden, m.fp32.hidden);
    CHECK_EQ(m.fp16.log_probs, m.fp32.log_probs);
    for (const auto& [e, k] :
         {std::pair{m.expected.fp32, m.fp32}, std::pair{m.expected.fp16, m.fp16}}) {
      CHECK_EQ(k.hidden, e.hidden);
      CHECK_EQ(k.log_probs, e.log_probs);
      CHECK_EQ(k.input_copy, e.input_copy);
      CHECK_EQ(k.weight_copies, e.weight_copies);
      CHECK_EQ(k.other, 0);
      CHECK_EQ(k.total, e.total);
      CHECK_EQ(k.total, k.hidden + k.log_probs + k.input_copy + k.weight_copies + k.loss);
    }
  }
}

TEST_CASE("B14: GradScaler grows, skips the injected inf step and backs off; both runs converge") {
  const MixedTrainingResult t = train_mixed_precision(1, Device("cpu"), 60, 25);
  REQUIRE_FALSE(t.events.empty());
  CHECK_EQ(t.events.front().step, 10);  // growth_interval clean steps
  CHECK(t.events.front().stepped);
  CHECK_EQ(t.events.front().scale_after, 2 * t.events.front().scale_before);
  bool found = false;
  for (const ScalerEvent& e : t.events) {
    if (!e.injected) continue;
    found = true;
    CHECK_EQ(e.step, 25);
    CHECK_FALSE(e.stepped);
    CHECK(e.weights_kept);
    CHECK_EQ(e.scale_after, e.scale_before / 2);
  }
  CHECK(found);
  CHECK_EQ(t.skipped, 1);
  CHECK_LT(t.final32, 1.0);
  CHECK_LT(t.final16, 1.0);
  CHECK_LT(t.final16, t.losses16.front() / 2);
}

}  // TEST_SUITE("examples")
