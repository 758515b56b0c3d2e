// B16: on-demand data loading and pinned staging buffers. The measurement, for the program and
// its test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

// One epoch over a dataset that generates each item in get() (float32 features from a
// generator seeded with the item's index, an int64 class), measured on the CPU allocator.
struct OnDemandEpoch {
  int64_t items = 0, features = 0, batch_size = 0;
  size_t prefetch = 0, num_batches = 0;
  int64_t batch_bytes = 0;    // one batch as allocated: rounded inputs + rounded targets
  int64_t item_bytes = 0;     // the per-item tensors a batch is stacked from, all rounded
  int64_t dataset_bytes = 0;  // allocated by constructing the on-demand dataset (0)
  // Allocated bytes above the start while batch k is held, once the loader has prefetched.
  std::vector<int64_t> expected_held, measured_held;
  int64_t after_epoch = 0;  // allocated above the start once the epoch's batches are released
  int64_t peak = 0;         // peak above the start during the prefetching epoch
  int64_t peak_bound = 0;   // (prefetch + 1) batches + the items of the batch being built
  int64_t sync_peak = 0;    // peak above the start with prefetch 0 (deterministic)
  int64_t sync_peak_expected = 0;  // one batch + its items
  // The same items held up front in a TensorDataset.
  int64_t preloaded_bytes = 0, preloaded_expected = 0;
};

// Runs one epoch of 512 x size items of 128 features in batches of 64 with `prefetch` batches
// prepared ahead, then the same epoch without prefetching, then builds the preloaded dataset.
OnDemandEpoch measure_on_demand_loading(int64_t size, size_t prefetch);

// The pinned staging buffers of a loader delivering to a CUDA device.
struct PinnedStaging {
  bool available = false;  // a CUDA device is present
  // DataLoader::staging_allocations() after each batch of one epoch.
  std::vector<size_t> staging_after_batch;
};

// An epoch delivered to cuda:0 through pinned staging buffers; `available` is false (and nothing
// runs) without a CUDA device.
PinnedStaging measure_pinned_staging(int64_t size);

}  // namespace memgrad::examples
