// Behaviours B15-B21 asserted on small sizes through the examples' own measurement code, and
// the SVG timeline renderer (interop/trace_svg.cpp) on a hand-made trace.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/memgrad.h"
#include "examples/behaviours/b15_lazy_init.h"
#include "examples/behaviours/b16_data_loading.h"
#include "examples/behaviours/b17_checkpoint_files.h"
#include "examples/behaviours/b18_preallocated_buffers.h"
#include "examples/behaviours/b19_startup_memory.h"
#include "examples/behaviours/b20_memory_timeline.h"
#include "examples/behaviours/b21_model_parallel.h"
#include "examples/behaviours/b23_will_it_fit.h"
#include "interop/trace_svg.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using namespace memgrad::examples;
using memgrad::testing::devices_under_test;

namespace {

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

int64_t count_of(const std::vector<std::pair<std::string, int64_t>>& counts,
                 const std::string& key) {
  for (const auto& [name, n] : counts) {
    if (name == key) return n;
  }
  return 0;
}

}  // namespace

TEST_SUITE("examples") {
TEST_CASE("B15: a LazyLinear model holds 0 bytes until its first forward, then weight + bias") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const LazyInitResult r = measure_lazy_init(1, dev);
    CHECK_EQ(r.construction_bytes, 0);
    CHECK_EQ(r.parameters_before, 0u);
    REQUIRE_EQ(r.layers.size(), 3u);
    int64_t in = r.in_features;
    for (const LazyLayerRow& row : r.layers) {
      CAPTURE(row.name);
      const int64_t out = row.name.find("-> 10)") != std::string::npos ? r.classes : r.hidden;
      CHECK_EQ(row.expected, memgrad::testing::rounded(static_cast<size_t>(out * in * 4)) +
                                 memgrad::testing::rounded(static_cast<size_t>(out * 4)));
      CHECK_EQ(row.measured, row.expected);
      CHECK(row.has_bias);
      in = out;
    }
    CHECK_EQ(r.first_forward_bytes, r.expected_parameter_bytes);
    CHECK_EQ(r.second_forward_bytes, 0);
    for (const char* name : {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"}) {
      CHECK_MESSAGE(contains(r.parameter_names, name), name);
    }
    CHECK_EQ(r.parameter_names.size(), 6u);
    CHECK_EQ(r.eager_construction_bytes, r.eager_expected);
    CHECK_EQ(r.weight_only_bytes, r.weight_only_expected);
    CHECK_LT(r.weight_only_bytes, r.layers[0].measured);  // the bias is really there
  }
}

TEST_CASE("B16: an on-demand dataset keeps memory flat; only prefetched batches are held") {
  for (size_t prefetch : {size_t{1}, size_t{2}}) {
    CAPTURE(prefetch);
    const OnDemandEpoch r = measure_on_demand_loading(1, prefetch);
    CHECK_EQ(r.dataset_bytes, 0);
    REQUIRE_EQ(r.num_batches, 8u);
    REQUIRE_EQ(r.measured_held.size(), r.num_batches);
    CHECK_EQ(r.batch_bytes, 64 * 128 * 4 + 512);
    for (size_t k = 0; k < r.num_batches; ++k) {
      CAPTURE(k);
      CHECK_EQ(r.measured_held[k], r.expected_held[k]);
      // Flat until the queue drains at the end of the epoch.
      if (k + prefetch < r.num_batches) {
        CHECK_EQ(r.measured_held[k], static_cast<int64_t>(prefetch + 1) * r.batch_bytes);
      }
    }
    CHECK_EQ(r.after_epoch, 0);
    CHECK_LE(r.peak, r.peak_bound);
    CHECK_GE(r.peak, static_cast<int64_t>(prefetch + 1) * r.batch_bytes);
    CHECK_EQ(r.sync_peak, r.sync_peak_expected);
    CHECK_EQ(r.preloaded_bytes, r.preloaded_expected);
    CHECK_EQ(r.preloaded_bytes, 512 * 128 * 4 + 512 * 8);
  }
  const PinnedStaging pinned = measure_pinned_staging(1);
  CHECK_EQ(pinned.available, cuda::is_available());
  if (pinned.available) {
    REQUIRE_FALSE(pinned.staging_after_batch.empty());
    CHECK_EQ(pinned.staging_after_batch.front(), pinned.staging_after_batch.back());
  } else {
    CHECK(pinned.staging_after_batch.empty());
  }
}

TEST_CASE("B17: a state dict round-trips bit-exactly and a checkpoint resumes to the same losses") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const CheckpointFilesResult r = measure_checkpoint_files(1, dev, 3);
    REQUIRE_EQ(r.tensors.size(), 4u);  // two Linear layers: weight and bias each
    int64_t data = 0, load = 0;
    for (const RoundTripRow& t : r.tensors) {
      CAPTURE(t.name);
      CHECK(t.bit_exact);
      data += t.nbytes;
      load += memgrad::testing::rounded(static_cast<size_t>(t.nbytes));
    }
    CHECK_EQ(r.data_bytes, data);
    CHECK_GT(r.header_bytes, 0);
    CHECK_EQ(r.file_bytes, 8 + r.header_bytes + r.data_bytes);
    CHECK_EQ(r.load_measured, load);
    CHECK_EQ(r.copy_in_measured, 0);
    REQUIRE_EQ(r.losses_continued.size(), 3u);
    REQUIRE_EQ(r.losses_resumed.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      CHECK_EQ(r.losses_resumed[i], r.losses_continued[i]);  // bit for bit, not approximately
    }
    CHECK_GT(r.checkpoint_file_bytes, r.file_bytes);  // + Adam state and metadata
    CHECK(r.files_removed);
  }
}

TEST_CASE("B18: out= buffers make 0 allocations per step after warm-up; out of place makes 5") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const BufferLoopResult r = measure_buffer_reuse(1, dev, 4);
    REQUIRE_EQ(r.out_of_place_allocs.size(), 4u);
    REQUIRE_EQ(r.reused_allocs.size(), 4u);
    CHECK_EQ(r.tensor_bytes, 64 * 128 * 4);
    for (size_t k = 0; k < 4; ++k) {
      CAPTURE(k);
      CHECK_EQ(r.out_of_place_allocs[k], 5);
      CHECK_EQ(r.out_of_place_bytes[k], 5 * r.tensor_bytes);
      CHECK_EQ(r.reused_allocs[k], k == 0 ? 2 : 0);
      CHECK_EQ(r.reused_bytes[k], k == 0 ? 2 * r.tensor_bytes : 0);
    }
    CHECK(r.same_values);
  }
}

TEST_CASE("B19: start-up memory arrives phase by phase exactly as the shapes say") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const StartupMemoryResult r = measure_startup_memory(1, dev);
    REQUIRE_EQ(r.phases.size(), 9u);
    for (const StartupPhase& p : r.phases) {
      CAPTURE(p.what);
      CHECK_EQ(p.measured, p.expected);
    }
    CHECK_EQ(r.phases[1].measured, r.parameter_bytes);  // model construction
    CHECK_EQ(r.adam_state_before, 0);
    CHECK_EQ(r.adam_state_after, 2 * r.parameter_bytes);
    CHECK_GE(r.peak_above_start, r.phases[3].measured);
  }
}

TEST_CASE("B20: the trace of a training step is labelled by phase and matches the allocator") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const TimelineResult r = record_training_step(1, dev);
    CHECK(r.json_parses);
    CHECK_EQ(r.counter_samples, r.events);
    CHECK_EQ(r.last_counter_allocated, r.memory_allocated_at_end);
    CHECK_EQ(r.trace_peak, r.stats_peak);
    // Adam's state is created while the gradients are still alive: the step's peak.
    CHECK_EQ(r.peak_phase, "optimizer");
    for (const char* phase : {"data", "forward", "backward", "optimizer", "zero_grad"}) {
      CAPTURE(phase);
      CHECK_GT(count_of(r.per_phase, phase), 0);
    }
    // Blocks still alive that the step allocated: x, y, and exp_avg + exp_avg_sq of 4 parameters.
    CHECK_EQ(count_of(r.per_action, "alloc") - count_of(r.per_action, "free_requested"), 2 + 8);
    CHECK_EQ(count_of(r.per_action, "free_requested"), count_of(r.per_action, "free_completed"));
    CHECK_EQ(r.svg.rfind("<svg", 0), 0u);
    CHECK_NE(r.svg.find("</svg>"), std::string::npos);
    CHECK_NE(r.svg.find(">forward<"), std::string::npos);
  }
}

TEST_CASE("trace_to_svg draws phases and lists the largest blocks alive at the peak") {
  const std::vector<TraceContextRecord> contexts = {
      {"forward", "linear", "", ""}, {"forward", "relu", "a<b", ""}, {"backward", "mm", "", ""}};
  auto event = [](TraceAction a, int64_t t, uint64_t addr, uint64_t n, int64_t alloc,
                  uint32_t ctx) {
    TraceEvent e;
    e.action = a;
    e.time_ns = t;
    e.address = addr;
    e.nbytes = n;
    e.allocated = alloc;
    e.reserved = 2 << 20;
    e.context = ctx;
    return e;
  };
  const std::vector<TraceEvent> events = {
      event(TraceAction::SegmentAlloc, 0, 0, 2 << 20, 0, 0),
      event(TraceAction::Alloc, 1000, 0, 1024, 1024, 0),
      event(TraceAction::Alloc, 2000, 1024, 4096, 5120, 1),  // the peak
      event(TraceAction::FreeRequested, 3000, 0, 1024, 4096, 2),
      event(TraceAction::Alloc, 4000, 0, 512, 4608, 2),
  };
  const std::string svg = trace_to_svg(events, contexts, "test <trace>", 0);
  CHECK_EQ(svg.rfind("<svg", 0), 0u);
  CHECK_NE(svg.find("test &lt;trace&gt;"), std::string::npos);  // escaped title
  CHECK_NE(svg.find("peak 5.00 KiB"), std::string::npos);
  // The legend: both blocks alive at the peak, largest first, with op, phase and label.
  const size_t relu = svg.find("4.00 KiB  relu (forward) [a&lt;b]");
  const size_t linear = svg.find("1.00 KiB  linear (forward)");
  REQUIRE_NE(relu, std::string::npos);
  REQUIRE_NE(linear, std::string::npos);
  CHECK_LT(relu, linear);
  CHECK_EQ(svg.find("mm (backward)"), std::string::npos);  // allocated after the peak
  CHECK_NE(svg.find("<title>forward</title>"), std::string::npos);
  CHECK_NE(svg.find("<title>backward</title>"), std::string::npos);
  CHECK_NE(trace_to_svg({}, {}, "empty", 0).find("no events recorded"), std::string::npos);
}

TEST_CASE("B21: a model split over two devices keeps each device's share on it") {
  const ModelParallelResult r =
      measure_model_parallel(1, Device("sim:0"), Device("sim:1"), size_t{64} << 20);
  REQUIRE_EQ(r.stages.size(), 6u);
  for (const DeviceStage& s : r.stages) {
    CAPTURE(s.what);
    CHECK_EQ(s.measured[0], s.expected[0]);
    CHECK_EQ(s.measured[1], s.expected[1]);
  }
  CHECK_EQ(r.stages[1].measured[0], r.parameter_bytes[0]);
  CHECK_EQ(r.stages[1].measured[1], r.parameter_bytes[1]);
  CHECK(r.grads_on_device[0]);  // the gradient crossed the device boundary
  CHECK(r.grads_on_device[1]);
  CHECK_EQ(mem_get_info(Device("sim:1")).second, size_t{64} << 20);
}

TEST_CASE("B23: a step estimated on a meta device is the real run's, byte for byte") {
  const WillItFitResult r = measure_will_it_fit(1, 23);
  const StepMemory &e = r.estimate, &m = r.real;
  CHECK_FALSE(m.out_of_memory);
  CHECK_GT(m.after_forward, m.after_init);
  CHECK_EQ(e.after_init, m.after_init);
  CHECK_EQ(e.after_forward, m.after_forward);
  CHECK_EQ(e.after_backward, m.after_backward);
  CHECK_EQ(e.after_step, m.after_step);
  CHECK_EQ(e.after_zero_grad, m.after_zero_grad);
  CHECK_EQ(e.peak_allocated, m.peak_allocated);
  CHECK_EQ(e.peak_reserved, m.peak_reserved);
  CHECK_EQ(e.device_allocs, m.device_allocs);
  // GPT-2 XL's shape: fits in 80 GiB (22.39 GiB at its peak), not in 16 GiB; the batch search's
  // answer fits and one more does not.
  CHECK_EQ(r.large_parameters, 1477475286);
  REQUIRE_EQ(r.large_runs.size(), 2u);
  CHECK_FALSE(r.large_runs[0].second.out_of_memory);
  CHECK_EQ(r.large_runs[0].second.peak_allocated, 24036329472);
  CHECK(r.large_runs[1].second.out_of_memory);
  CHECK_NE(r.large_runs[1].second.oom_message.find("meta:23 out of memory"), std::string::npos);
  CHECK_EQ(r.largest_batch, 7);
  for (const auto& [batch, fits] : r.batch_probes) {
    CAPTURE(batch);
    CHECK_EQ(fits, batch <= r.largest_batch);
  }
  CHECK_EQ(memory_allocated(Device("meta:23")), 0);
}

}  // TEST_SUITE("examples")
