// B16 -- on-demand data loading and pinned memory (seed 002 example 3, seed 003 §4).
//
// A Dataset that generates item i inside get(i) holds no data: an epoch through a DataLoader
// allocates only the batch in use and the batches prefetched behind it, and the same bytes are
// allocated after every batch (the loader's background thread is waited for before each reading
// with wait_until_prefetched(), so the numbers are exact). The same items held up front in a
// TensorDataset cost their full size before the first batch. With a CUDA target the loader
// stages each batch through pinned host buffers that it reuses from batch to batch.
//
//   ./memgrad example b16 [--size N]
#include "examples/behaviours/b16_data_loading.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include "engine/cuda.h"
#include "engine/data/data_loader.h"
#include "engine/memgrad.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"

namespace memgrad::examples {
namespace {

constexpr int64_t kFeatures = 128;
constexpr int64_t kBatch = 64;
constexpr int64_t kClasses = 10;
constexpr uint64_t kDataSeed = 1234;

int64_t cpu_allocated() { return static_cast<int64_t>(memory_allocated(kCPU)); }

// Items made when asked: features from a generator seeded with the index (so every epoch, and
// every thread, sees the same item i), and a class drawn from the same generator.
class GeneratedDataset final : public data::Dataset {
 public:
  explicit GeneratedDataset(size_t items) : items_(items) {}
  size_t size() const override { return items_; }
  data::Example get(size_t i) const override {
    Generator g(kDataSeed + i);
    return {randn({kFeatures}, TensorOptions(kFloat32), &g),
            randint(0, kClasses, {}, TensorOptions(kInt64), &g)};
  }

 private:
  size_t items_;
};

// One epoch with prefetching: allocated bytes while each batch is held, and the peak.
void prefetching_epoch(const GeneratedDataset& dataset, OnDemandEpoch& r) {
  const int64_t start = cpu_allocated();
  reset_peak_memory_stats(kCPU);
  data::DataLoader loader(dataset, {.batch_size = static_cast<size_t>(kBatch),
                                    .shuffle = true,
                                    .seed = kDataSeed,
                                    .prefetch = r.prefetch});
  r.num_batches = loader.num_batches();
  for (size_t k = 0; k < r.num_batches; ++k) {
    const std::optional<data::Example> batch = loader.next();
    loader.wait_until_prefetched();
    const size_t ahead = std::min(r.prefetch, r.num_batches - 1 - k);
    r.expected_held.push_back(static_cast<int64_t>(1 + ahead) * r.batch_bytes);
    r.measured_held.push_back(cpu_allocated() - start);
  }
  r.after_epoch = cpu_allocated() - start;
  r.peak = static_cast<int64_t>(max_memory_allocated(kCPU)) - start;
}

// The same epoch built synchronously in next(): its peak is one batch plus its items.
void synchronous_epoch(const GeneratedDataset& dataset, OnDemandEpoch& r) {
  const int64_t start = cpu_allocated();
  reset_peak_memory_stats(kCPU);
  data::DataLoader loader(dataset, {.batch_size = static_cast<size_t>(kBatch), .prefetch = 0});
  while (const std::optional<data::Example> batch = loader.next()) {
  }
  r.sync_peak = static_cast<int64_t>(max_memory_allocated(kCPU)) - start;
}

}  // namespace

OnDemandEpoch measure_on_demand_loading(int64_t size, size_t prefetch) {
  OnDemandEpoch r;
  r.items = 512 * size;
  r.features = kFeatures;
  r.batch_size = kBatch;
  r.prefetch = prefetch;
  r.batch_bytes = rounded(kBatch * kFeatures * 4) + rounded(kBatch * 8);
  r.item_bytes = kBatch * (rounded(kFeatures * 4) + rounded(8));
  r.peak_bound = static_cast<int64_t>(prefetch + 1) * r.batch_bytes + r.item_bytes;
  r.sync_peak_expected = r.batch_bytes + r.item_bytes;

  int64_t before = cpu_allocated();
  const GeneratedDataset dataset(static_cast<size_t>(r.items));
  r.dataset_bytes = cpu_allocated() - before;
  prefetching_epoch(dataset, r);
  synchronous_epoch(dataset, r);

  before = cpu_allocated();
  const data::TensorDataset preloaded(randn({r.items, kFeatures}),
                                      randint(0, kClasses, {r.items}, TensorOptions(kInt64)));
  r.preloaded_bytes = cpu_allocated() - before;
  r.preloaded_expected = rounded(r.items * kFeatures * 4) + rounded(r.items * 8);
  return r;
}

PinnedStaging measure_pinned_staging(int64_t size) {
  PinnedStaging r;
  r.available = cuda::is_available();
  if (!r.available) return r;
  const GeneratedDataset dataset(static_cast<size_t>(512 * size));
  data::DataLoader loader(
      dataset,
      {.batch_size = static_cast<size_t>(kBatch), .device = Device("cuda:0"), .pin_memory = true});
  while (const std::optional<data::Example> batch = loader.next()) {
    r.staging_after_batch.push_back(loader.staging_allocations());
  }
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B16", "on-demand data loading and pinned memory", "seeds 002 (example 3) and 003 (section 4)",
    "A dataset that produces each item when it is asked for, read in batches by a DataLoader, "
    "avoids holding the whole data set in memory; pinned host memory speeds up copies to the GPU."};

constexpr size_t kPrefetch = 2;

// One row per run of batches with the same expectation; `measured` is the run's value farthest
// from the expectation (equal to it when every batch matched).
void add_held_rows(MemoryReport& report, const OnDemandEpoch& r) {
  size_t begin = 0;
  for (size_t k = 1; k <= r.num_batches; ++k) {
    if (k < r.num_batches && r.expected_held[k] == r.expected_held[begin]) continue;
    int64_t worst = r.measured_held[begin];
    for (size_t j = begin; j < k; ++j) {
      if (std::llabs(r.measured_held[j] - r.expected_held[j]) >
          std::llabs(worst - r.expected_held[j])) {
        worst = r.measured_held[j];
      }
    }
    const size_t ahead = static_cast<size_t>(r.expected_held[begin] / r.batch_bytes) - 1;
    const std::string batches = k - begin == 1 ? fmt::format("batch {}", begin + 1)
                                               : fmt::format("batches {}-{}", begin + 1, k);
    report.add(fmt::format("while holding {} (+ {} prefetched)", batches, ahead),
               r.expected_held[begin], worst);
    begin = k;
  }
}

int body(const BehaviourFlags& flags) {
  const OnDemandEpoch r = measure_on_demand_loading(flags.size, kPrefetch);
  MemoryReport report(fmt::format(
      "One epoch of {} generated items ({} float32 features + an int64 class) in {} batches of "
      "{},\nprefetch {}, CPU allocator, bytes above the start:",
      r.items, r.features, r.num_batches, r.batch_size, r.prefetch));
  report.add("constructing the on-demand dataset", 0, r.dataset_bytes);
  add_held_rows(report, r);
  report.add("after the epoch (every batch released)", 0, r.after_epoch);
  report.add(fmt::format("peak without prefetch: 1 batch + its {} item tensors", 2 * r.batch_size),
             r.sync_peak_expected, r.sync_peak);
  report.add(fmt::format("for comparison: the {} items held up front (TensorDataset)", r.items),
             r.preloaded_expected, r.preloaded_bytes);
  report.print();
  const bool peak_ok = r.peak <= r.peak_bound;
  fmt::print(
      "\none batch = {} B; peak with prefetch {} stays within (prefetch + 1) batches + one "
      "batch of items = {} B: {}\n",
      with_commas(r.batch_bytes), r.prefetch, with_commas(r.peak_bound), peak_ok ? "yes" : "NO");
  const PinnedStaging pinned = measure_pinned_staging(flags.size);
  if (!pinned.available) {
    fmt::print(
        "pinned staging: this build or machine has no CUDA device, so pinned memory is not "
        "available; on a GPU the loader stages each batch through two reused pinned "
        "buffers (DataLoader::staging_allocations() stays constant after the first batch).\n");
  } else {
    fmt::print(
        "pinned staging to cuda:0: staging allocations after batch 1: {}, after batch {}: {}\n",
        pinned.staging_after_batch.front(), pinned.staging_after_batch.size(),
        pinned.staging_after_batch.back());
  }
  const bool pinned_ok =
      !pinned.available || pinned.staging_after_batch.front() == pinned.staging_after_batch.back();
  print_conclusion(fmt::format(
      "the on-demand dataset held {} bytes; while a batch was in use the loader held the same {} "
      "bytes ({} batches) at every step until the queue drained, and nothing after the epoch, "
      "while holding the data up front costs {} and grows with the data set.",
      r.dataset_bytes, with_commas(r.measured_held.front()), r.prefetch + 1,
      human_bytes(r.preloaded_bytes)));
  return report.all_match() && peak_ok && pinned_ok ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b16_data_loading_main() is its main() (a generated file calls it).
int b16_data_loading_main(int argc, char** argv) { return run_behaviour(argc, argv, kInfo, body); }

}  // namespace memgrad::examples
