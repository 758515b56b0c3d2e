// Behaviours B1-B7 asserted on small sizes through the examples' own measurement code.
#include <doctest/doctest.h>

#include "engine/memgrad.h"
#include "examples/behaviours/b01_allocated_vs_reserved.h"
#include "examples/behaviours/b02_empty_cache.h"
#include "examples/behaviours/b03_memory_summary.h"
#include "examples/behaviours/b04_fragmentation_oom.h"
#include "examples/behaviours/b05_views_share_storage.h"
#include "examples/behaviours/b06_inplace_ops.h"
#include "examples/behaviours/b07_inplace_softmax.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using namespace memgrad::examples;

namespace {

constexpr int64_t kOneMiB = 1024 * 1024;

}  // namespace

TEST_SUITE("examples") {

TEST_CASE("B1: freeing a tensor lowers allocated, not reserved; the same size reuses the block") {
  for (Device dev : memgrad::testing::devices_under_test()) {
    CAPTURE(dev.str());
    const ReserveResult r = measure_allocated_vs_reserved(1, dev);
    REQUIRE_EQ(r.steps.size(), 4);
    for (const ReserveStep& s : r.steps) {
      CAPTURE(s.what);
      CHECK_EQ(s.allocated, s.expected_allocated);
      CHECK_EQ(s.reserved, s.expected_reserved);
      CHECK_EQ(s.segments, s.expected_segments);
    }
    // x is 512 x 1024 floats = 2 MiB: a large-pool request, served from a 20 MiB segment.
    CHECK_EQ(r.steps[1].allocated, 2 * kOneMiB);
    CHECK_EQ(r.steps[1].reserved, 20 * kOneMiB);
    // Freed: allocated back to 0, reserved unchanged.
    CHECK_EQ(r.steps[2].allocated, 0);
    CHECK_EQ(r.steps[2].reserved, r.steps[1].reserved);
    // Same size again: the cached block at the same address, no new segment.
    CHECK_EQ(r.steps[3].segments, r.steps[1].segments);
    CHECK_EQ(r.reuse_offset, 0);
  }
}

TEST_CASE("B2: empty_cache returns cached segments, never allocated memory nor split segments") {
  for (Device dev : memgrad::testing::devices_under_test()) {
    CAPTURE(dev.str());
    const EmptyCacheResult r = measure_empty_cache(1, dev);
    REQUIRE_EQ(r.steps.size(), 5);
    for (const CacheStep& s : r.steps) {
      CAPTURE(s.what);
      CHECK_EQ(s.allocated, s.expected_allocated);
      CHECK_EQ(s.reserved, s.expected_reserved);
      CHECK_EQ(s.non_releasable, s.expected_non_releasable);
    }
    const CacheStep &freed = r.steps[1], &emptied = r.steps[2], &last = r.steps[4];
    CHECK_GT(freed.reserved, freed.allocated);
    // empty_cache() leaves allocated alone ...
    CHECK_EQ(emptied.allocated, freed.allocated);
    // ... and what stays reserved above it is exactly the split segment's free tail.
    CHECK_EQ(emptied.reserved, r.split_segment);
    CHECK_EQ(emptied.reserved - emptied.allocated, emptied.non_releasable);
    CHECK_EQ(emptied.non_releasable, 18 * kOneMiB);
    CHECK_EQ(last.reserved, last.allocated);
    CHECK_NE(r.summary_rows.find("Non-releasable memory"), std::string::npos);
  }
}

TEST_CASE("B3: memory stats after known allocations match the allocator's rules") {
  for (Device dev : memgrad::testing::devices_under_test()) {
    CAPTURE(dev.str());
    const SummaryResult r = measure_memory_summary(1, dev);
    REQUIRE_EQ(r.stats.size(), 19);
    for (const StatCheck& s : r.stats) {
      CAPTURE(s.name);
      CHECK_EQ(s.measured, s.expected);
    }
    // allocated = a (256 KiB) + c (4 MiB); reserved = 2 MiB + 20 MiB + 24 MiB segments.
    CHECK_EQ(r.stats[0].measured, 256 * 1024 + 4 * kOneMiB);
    CHECK_EQ(r.stats[2].measured, 46 * kOneMiB);
    for (const char* row : {"Allocated memory", "Reserved memory", "Non-releasable memory",
                            "Allocations", "Reserved segments", "OOMs:"}) {
      CAPTURE(row);
      CHECK_NE(r.summary.find(row), std::string::npos);
    }
  }
}

TEST_CASE("B4: a fragmented cache raises OOM although enough memory is free; each fix works") {
  const Device sim0("sim:0");
  const size_t capacity_before = allocator_for(sim0).source().capacity();
  const FragmentationResult r = measure_fragmentation(1, 0);
  CHECK_EQ(r.capacity, 100 * kOneMiB);
  REQUIRE_EQ(r.runs.size(), r.expandable_known ? 4 : 3);
  for (const FragmentationRun& run : r.runs) {
    CAPTURE(run.name);
    CHECK_EQ(run.oom, run.expected_oom);
    CHECK_EQ(run.allocated, run.expected_allocated);
    CHECK_EQ(run.reserved, run.expected_reserved);
  }
  const FragmentationRun& base = r.runs[0];
  REQUIRE(base.oom);
  // 50 MiB refused with 80 MiB free: 40 MiB cached in the split segment + 40 MiB never reserved.
  CHECK_EQ(base.oom_info.requested, 50 * kOneMiB);
  CHECK_EQ(base.oom_info.free, 40 * kOneMiB);
  CHECK_EQ(base.oom_info.allocated, 20 * kOneMiB);
  CHECK_EQ(base.oom_info.reserved, 60 * kOneMiB);
  CHECK_GT(base.oom_info.free + (base.oom_info.reserved - base.oom_info.allocated),
           base.oom_info.requested);
  CHECK_EQ(base.alloc_retries, 1);
  CHECK_EQ(base.ooms, 1);
  CHECK_NE(base.oom_message.find("out of memory"), std::string::npos);
  // Where the 40 MiB were: all fenced behind y in x1's segment (hard), none in free segments or
  // other streams; the 40 MiB block is also the largest request that would have succeeded.
  const FragmentationReport& f = base.oom_info.fragmentation;
  REQUIRE(base.oom_info.has_fragmentation);
  CHECK_EQ(f.hard, 40 * kOneMiB);
  CHECK_EQ(f.soft, 0);
  CHECK_EQ(f.stream, 0);
  CHECK_EQ(f.hard + f.soft + f.stream, base.oom_info.reserved - base.oom_info.allocated);
  CHECK_EQ(f.largest_free_block, 40 * kOneMiB);
  CHECK_EQ(f.largest_request, 40 * kOneMiB);
  CHECK_NE(base.oom_message.find("40.00 MiB is fenced by live blocks (hard fragmentation)"),
           std::string::npos);
  // max_split_size_mb:40: y gets its own 20 MiB segment, z takes the cached 60 MiB block whole.
  CHECK_EQ(r.runs[1].reserved, 80 * kOneMiB);
  CHECK_EQ(r.runs[1].allocated, 80 * kOneMiB);
  // empty_cache() before y: two segments of exactly 20 and 50 MiB.
  CHECK_EQ(r.runs[2].reserved, 70 * kOneMiB);
  // The device is restored afterwards: its capacity and an allocator without max_split_size.
  CHECK_EQ(allocator_for(sim0).source().capacity(), capacity_before);
  CHECK_EQ(memory_stats(sim0).max_split_size, -1);
}

TEST_CASE("B5: views add 0 bytes and share storage; copies add exactly the rounded bytes") {
  for (Device dev : memgrad::testing::devices_under_test()) {
    CAPTURE(dev.str());
    for (const ViewRow& r : measure_views(1, dev)) {
      CAPTURE(r.op);
      CHECK_EQ(r.measured, r.expected);
      CHECK_EQ(r.shares_storage, r.expected == 0);
    }
  }
}

TEST_CASE("B6: add_ allocates nothing; autograd rejects a modified saved tensor and a leaf") {
  for (Device dev : memgrad::testing::devices_under_test()) {
    CAPTURE(dev.str());
    const size_t before = memory_allocated(dev);
    const InplaceResult r = measure_inplace_ops(1, dev);
    CHECK_EQ(memory_allocated(dev), before);  // the graphs, errors included, freed everything
    // x is 256 x 1024 floats = 1 MiB.
    CHECK_EQ(r.add_out_of_place, kOneMiB);
    CHECK_EQ(r.add_in_place, 0);
    CHECK_EQ(r.version_after, r.version_before + 1);
    CHECK(r.same_data);
    REQUIRE(r.saved_error_raised);
    CHECK_NE(r.saved_error.find("modified by an inplace operation: [float32 [2, 3]], which is "
                                "output 0 of SigmoidBackward, is at version 1; expected version "
                                "0 instead"),
             std::string::npos);
    REQUIRE(r.leaf_error_raised);
    CHECK_NE(r.leaf_error.find("a leaf Variable that requires grad is being used in an in-place "
                               "operation"),
             std::string::npos);
    CHECK_EQ(r.leaf_no_grad_add, 0);
    CHECK_EQ(r.non_leaf_add, 0);
    CHECK_EQ(r.non_leaf_grad_fn, "AddBackward");
    // d/dw sum(w * 2 + 1) = 2
    CHECK_EQ(r.grad, std::vector<double>(6, 2.0));
  }
}

TEST_CASE("B7: in-place softmax saves the output without autograd and costs more with it") {
  for (Device dev : memgrad::testing::devices_under_test()) {
    CAPTURE(dev.str());
    const size_t before = memory_allocated(dev);
    const SoftmaxResult r = measure_inplace_softmax(1, dev);
    // Every graph was freed, including the in-place one whose amax saved x before sub_ changed
    // x's history (no reference cycle through the saved tensor).
    CHECK_EQ(memory_allocated(dev), before);
    REQUIRE_EQ(r.cases.size(), 4);
    for (const SoftmaxCase& c : r.cases) {
      CAPTURE(c.name);
      CHECK_EQ(c.peak, c.expected_peak);
      CHECK_EQ(c.held, c.expected_held);
      CHECK_LT(c.max_error, 1e-5);
    }
    // N = 256 x 1024 floats = 1 MiB; R = 256 floats = 1 KiB.
    CHECK_EQ(r.output_bytes, kOneMiB);
    CHECK_EQ(r.row_bytes, 1024);
    // Out of place: the fused kernel allocates exactly its output, no intermediates.
    CHECK_EQ(r.cases[0].peak, r.output_bytes);
    // In place without autograd: only one row temporary at a time.
    CHECK_EQ(r.cases[1].peak, r.row_bytes);
    // With autograd: the output is the saved tensor (nothing more) ...
    CHECK_EQ(r.cases[2].peak, r.output_bytes);
    CHECK(r.cases[2].backward_ran);
    // ... while in place keeps div_'s copy of x plus two row results, and cannot backpropagate.
    CHECK_EQ(r.cases[3].peak, r.output_bytes + 2 * r.row_bytes);
    CHECK_FALSE(r.cases[3].backward_ran);
    CHECK_NE(r.cases[3].backward_error.find("ExpBackward"), std::string::npos);
  }
}

}  // TEST_SUITE("examples")
