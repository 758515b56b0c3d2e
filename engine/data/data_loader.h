// DataLoader: batches from a Dataset, shuffled per epoch with a seed, built ahead of time on a
// background thread.
//
// Memory: at most `prefetch` batches exist ahead of the one being used. Their tensors are
// allocated on the thread that calls next() (the background thread only fills them), so the
// device allocator sees the same sequence of requests on every run. With a CUDA target, each
// batch is collated into pinned host staging buffers that are reused from batch to batch (no
// allocation per batch once warm) and copied to the device asynchronously; a buffer is refilled
// only after the device has run the copy out of it for the batch before (an event recorded after
// that copy, so the host waits for the copy alone, not for the steps queued after it). On other
// targets the batch is moved with to(device).
#pragma once

#include <array>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/device.h"

namespace memgrad::data {

struct DataLoaderOptions {
  size_t batch_size = 64;
  bool shuffle = false;
  uint64_t seed = 0;  // the permutation of epoch e uses seed + e
  bool drop_last = false;
  size_t prefetch = 2;     // batches prepared ahead by the background thread (0: none)
  Device device = kCPU;    // where batches are delivered
  bool pin_memory = true;  // stage through pinned host memory when device is CUDA
};

class DataLoader {
 public:
  // Throws ValueError for batch_size 0. The dataset must outlive the loader.
  DataLoader(const Dataset& dataset, DataLoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Batches per epoch.
  size_t num_batches() const;
  // Starts epoch `epoch` (reshuffles with seed + epoch). Implicitly called by next() at the end
  // of an epoch's batches only when the user calls it again.
  void start_epoch(size_t epoch);
  // The next batch of the current epoch, or nullopt at its end. Rethrows what building the batch
  // threw (the dataset's error), also when the background thread built it; it is thrown again
  // by every later call until start_epoch().
  std::optional<Example> next();

  // Blocks until the background thread has prepared every batch it may prepare ahead (the
  // prefetch queue is full or the epoch is exhausted), so memory measurements that follow are
  // not disturbed by its allocations.
  void wait_until_prefetched();

  // The indices of the current epoch, in order (for tests).
  const std::vector<size_t>& order() const { return order_; }
  // Number of pinned staging allocations made so far (stays constant once warm).
  size_t staging_allocations() const { return staging_allocations_; }

 private:
  std::vector<size_t> batch_indices(size_t batch_index) const;
  Example make_batch(size_t batch_index);
  // Allocates the buffers of the next unscheduled batch (on the calling thread) and queues them
  // for the worker to fill.
  void schedule_next();
  Example deliver(Example host_batch);
  void worker_loop();
  void stop_worker();
  // Frees the batches prepared ahead (the worker must be stopped), in batch order.
  void release_prefetched();

  const Dataset& dataset_;
  DataLoaderOptions options_;
  std::vector<size_t> order_;
  size_t next_batch_ = 0;  // next batch index to hand out
  size_t staging_allocations_ = 0;
  // A pinned buffer reused across batches (CUDA targets), and the end of the asynchronous copy
  // out of it for the last batch: the buffer is written again only once that copy has run.
  struct Staging {
    Tensor buffer;
    std::shared_ptr<void> copied;
  };
  std::array<Staging, 2> staging_;  // the input's and the target's

  // Background prefetch state. Batches move pending_ (allocated, to fill) -> worker -> ready_.
  std::mutex mutex_;
  std::condition_variable cv_;
  size_t scheduled_ = 0;  // batches whose buffers were allocated (owned by the caller's thread)
  std::deque<std::pair<size_t, Example>> pending_;
  std::deque<std::pair<size_t, Example>> ready_;
  bool in_flight_ = false;
  bool stop_ = false;
  std::exception_ptr error_;  // what stopped the worker; rethrown by next() after ready_ drains
  std::thread worker_;
};

}  // namespace memgrad::data
