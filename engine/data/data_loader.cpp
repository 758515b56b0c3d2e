// Datasets and the DataLoader: shuffling, batching, a prefetch thread, pinned staging.
#include "engine/data/data_loader.h"

#include <algorithm>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "allocator/trace.h"
#include "engine/copy.h"
#include "engine/error.h"
#include "engine/factories.h"
#include "engine/indexing.h"

namespace memgrad::data {

// ---- datasets ----

Example Dataset::get_batch(const std::vector<size_t>& indices) const {
  std::vector<Tensor> inputs, targets;
  for (size_t i : indices) {
    Example e = get(i);
    inputs.push_back(std::move(e.input));
    targets.push_back(std::move(e.target));
  }
  return {stack(inputs), stack(targets)};
}

TensorDataset::TensorDataset(Tensor inputs, Tensor targets)
    : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  if (inputs_.dim() == 0 || targets_.dim() == 0 || inputs_.size(0) != targets_.size(0)) {
    throw ShapeError(fmt::format("[TensorDataset] inputs {} and targets {} must have the same "
                                 "first dimension",
                                 to_string(inputs_.sizes()), to_string(targets_.sizes())));
  }
}

size_t TensorDataset::size() const { return static_cast<size_t>(inputs_.size(0)); }

Example TensorDataset::get(size_t i) const {
  if (i >= size()) {
    throw IndexError(fmt::format("[TensorDataset] index {} out of range for {} items", i, size()));
  }
  return {inputs_.select(0, static_cast<int64_t>(i)), targets_.select(0, static_cast<int64_t>(i))};
}

Example TensorDataset::get_batch(const std::vector<size_t>& indices) const {
  std::vector<int64_t> idx(indices.begin(), indices.end());
  const Tensor index = from_vector(idx, {static_cast<int64_t>(idx.size())}).to(inputs_.device());
  return {index_select(inputs_, 0, index), index_select(targets_, 0, index)};
}

// ---- DataLoader ----

DataLoader::DataLoader(const Dataset& dataset, DataLoaderOptions options)
    : dataset_(dataset), options_(options) {
  if (options_.batch_size == 0) throw ValueError("[DataLoader] batch_size must be >= 1");
  start_epoch(0);
}

DataLoader::~DataLoader() { stop_worker(); }

size_t DataLoader::num_batches() const {
  const size_t n = dataset_.size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::start_epoch(size_t epoch) {
  stop_worker();
  order_.resize(dataset_.size());
  std::iota(order_.begin(), order_.end(), size_t{0});
  if (options_.shuffle) {
    std::mt19937_64 rng(options_.seed + epoch);
    std::shuffle(order_.begin(), order_.end(), rng);
  }
  next_batch_ = 0;
  produce_next_ = 0;
  ready_.clear();
  stop_ = false;
  if (options_.prefetch > 0 && num_batches() > 0) worker_ = std::thread([this] { worker_loop(); });
}

Example DataLoader::make_batch(size_t batch_index) {
  const size_t begin = batch_index * options_.batch_size;
  const size_t end = std::min(begin + options_.batch_size, order_.size());
  const std::vector<size_t> indices(order_.begin() + static_cast<std::ptrdiff_t>(begin),
                                    order_.begin() + static_cast<std::ptrdiff_t>(end));
  TraceLabelScope label("data loading");
  return dataset_.get_batch(indices);
}

Example DataLoader::deliver(Example batch) {
  const Device target = options_.device;
  if (batch.input.device() == target) return batch;
  if (target.is_cuda() && options_.pin_memory) {
    // Reuse two pinned staging buffers (input, target); reallocate only when a batch is larger.
    if (staging_.size() != 2) staging_.resize(2);
    Tensor* parts[] = {&batch.input, &batch.target};
    for (size_t k = 0; k < 2; ++k) {
      Tensor& s = staging_[k];
      const Tensor& src = *parts[k];
      if (!s.defined() || s.numel() < src.numel() || s.dtype() != src.dtype()) {
        s = pin_memory(empty({src.numel()}, src.dtype()));
        ++staging_allocations_;
      }
      Tensor view = s.slice(0, 0, src.numel()).view(src.sizes());
      view.copy_(src);
      *parts[k] = to_device(view, target, /*non_blocking=*/true);
    }
    return batch;
  }
  return {to_device(batch.input, target), to_device(batch.target, target)};
}

void DataLoader::worker_loop() {
  const size_t total = num_batches();
  while (true) {
    size_t index;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || (ready_.size() < options_.prefetch && produce_next_ < total); });
      if (stop_ || produce_next_ >= total) return;
      index = produce_next_++;
    }
    Example batch = make_batch(index);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.emplace_back(index, std::move(batch));
    }
    cv_.notify_all();
  }
}

void DataLoader::stop_worker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void DataLoader::wait_until_prefetched() {
  if (options_.prefetch == 0) return;
  std::unique_lock<std::mutex> lock(mutex_);
  const size_t total = num_batches();
  // Produced batches are either handed out or waiting in ready_.
  cv_.wait(lock, [&] {
    return stop_ || ready_.size() >= options_.prefetch ||
           (produce_next_ >= total && ready_.size() + next_batch_ >= total);
  });
}

std::optional<Example> DataLoader::next() {
  if (next_batch_ >= num_batches()) return std::nullopt;
  Example batch;
  if (options_.prefetch == 0) {
    batch = make_batch(next_batch_);
  } else {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !ready_.empty(); });
    batch = std::move(ready_.front().second);
    ready_.pop_front();
    lock.unlock();
    cv_.notify_all();
  }
  ++next_batch_;
  return deliver(std::move(batch));
}

}  // namespace memgrad::data
