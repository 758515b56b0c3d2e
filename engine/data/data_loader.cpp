// Datasets and the DataLoader: shuffling, batching, a prefetch thread, pinned staging.
#include "engine/data/data_loader.h"

#include <algorithm>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "allocator/trace.h"
#include "engine/copy.h"
#include "engine/device_backend.h"
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

namespace {

Tensor empty_like_batch(const Tensor& item, size_t n) {
  std::vector<int64_t> sizes{static_cast<int64_t>(n)};
  for (int64_t s : item.sizes()) sizes.push_back(s);
  return empty(sizes, TensorOptions(item.dtype()).with_device(item.device()));
}

void check_batch_buffers(const Example& out, size_t n, const char* who) {
  if (!out.input.defined() || !out.target.defined() || out.input.dim() == 0 ||
      out.target.dim() == 0 || out.input.size(0) != static_cast<int64_t>(n) ||
      out.target.size(0) != static_cast<int64_t>(n)) {
    throw ShapeError(
        fmt::format("[{}] fill_batch needs tensors of {} items, got input {} and "
                    "target {}",
                    who, n, out.input.defined() ? to_string(out.input.sizes()) : "undefined",
                    out.target.defined() ? to_string(out.target.sizes()) : "undefined"),
        who,
        ShapeRoles::operands(out.input.defined() ? out.input.sizes() : Shape{},
                             out.target.defined() ? out.target.sizes() : Shape{}));
  }
}

}  // namespace

Example Dataset::empty_batch(size_t n) const {
  const Example item = get(0);
  return {empty_like_batch(item.input, n), empty_like_batch(item.target, n)};
}

void Dataset::fill_batch(const std::vector<size_t>& indices, Example& out) const {
  check_batch_buffers(out, indices.size(), "Dataset");
  for (size_t k = 0; k < indices.size(); ++k) {
    const Example item = get(indices[k]);
    out.input.select(0, static_cast<int64_t>(k)).copy_(item.input);
    out.target.select(0, static_cast<int64_t>(k)).copy_(item.target);
  }
}

TensorDataset::TensorDataset(Tensor inputs, Tensor targets)
    : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  if (inputs_.dim() == 0 || targets_.dim() == 0 || inputs_.size(0) != targets_.size(0)) {
    throw ShapeError(fmt::format("[TensorDataset] inputs {} and targets {} must have the same "
                                 "first dimension",
                                 to_string(inputs_.sizes()), to_string(targets_.sizes())),
                     "TensorDataset", ShapeRoles::operands(inputs_.sizes(), targets_.sizes()));
  }
}

size_t TensorDataset::size() const { return static_cast<size_t>(inputs_.size(0)); }

Example TensorDataset::get(size_t i) const {
  if (i >= size()) {
    throw IndexError(fmt::format("[TensorDataset] index {} out of range for {} items", i, size()),
                     "TensorDataset",
                     {.index = static_cast<int64_t>(i), .size = static_cast<int64_t>(size())});
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
  if (options_.batch_size == 0)
    throw ValueError("[DataLoader] batch_size must be >= 1", "DataLoader", "batch_size");
  start_epoch(0);
}

DataLoader::~DataLoader() {
  stop_worker();
  release_prefetched();
}

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
  release_prefetched();
  next_batch_ = 0;
  scheduled_ = 0;
  in_flight_ = false;
  error_ = nullptr;
  stop_ = false;
  if (options_.prefetch > 0 && num_batches() > 0) {
    for (size_t k = 0; k < options_.prefetch; ++k) schedule_next();
    worker_ = std::thread([this] { worker_loop(); });
  }
}

std::vector<size_t> DataLoader::batch_indices(size_t batch_index) const {
  const size_t begin = batch_index * options_.batch_size;
  const size_t end = std::min(begin + options_.batch_size, order_.size());
  return {order_.begin() + static_cast<std::ptrdiff_t>(begin),
          order_.begin() + static_cast<std::ptrdiff_t>(end)};
}

Example DataLoader::make_batch(size_t batch_index) {
  TraceLabelScope label("data loading");
  return dataset_.get_batch(batch_indices(batch_index));
}

void DataLoader::schedule_next() {
  if (scheduled_ >= num_batches()) return;
  Example buffers;
  {
    TraceLabelScope label("data loading");
    buffers = dataset_.empty_batch(batch_indices(scheduled_).size());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.emplace_back(scheduled_, std::move(buffers));
  }
  ++scheduled_;
  cv_.notify_all();
}

Example DataLoader::deliver(Example batch) {
  const Device target = options_.device;
  if (batch.input.device() == target) return batch;
  TraceLabelScope label("data loading");  // the device's copy of the batch: the step's input
  if (target.is_cuda() && options_.pin_memory) {
    // Reuse two pinned staging buffers (input, target); reallocate only when a batch is larger.
    Tensor* parts[] = {&batch.input, &batch.target};
    for (size_t k = 0; k < 2; ++k) {
      Staging& s = staging_[k];
      const Tensor& src = *parts[k];
      if (!s.buffer.defined() || s.buffer.numel() < src.numel() ||
          s.buffer.dtype() != src.dtype()) {
        s.buffer =
            pin_memory(empty({src.numel()}, src.dtype()));  // the old block waits for its copy
        ++staging_allocations_;
      } else {
        // The last batch's copy out of this buffer may still be queued behind the device's work:
        // overwriting it now would send this batch's bytes in that batch's place.
        cuda_wait_for_mark(target.index(), s.copied);
      }
      s.copied.reset();
      Tensor view = s.buffer.slice(0, 0, src.numel()).view(src.sizes());
      view.copy_(src);
      *parts[k] = to_device(view, target, /*non_blocking=*/true);
      s.copied = cuda_mark_current_stream(target.index());
    }
    return batch;
  }
  return {to_device(batch.input, target), to_device(batch.target, target)};
}

void DataLoader::worker_loop() {
  while (true) {
    std::pair<size_t, Example> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      if (stop_) return;
      job = std::move(pending_.front());
      pending_.pop_front();
      in_flight_ = true;
    }
    std::exception_ptr error;
    try {
      dataset_.fill_batch(batch_indices(job.first), job.second);
    } catch (...) {
      error = std::current_exception();  // an exception must not leave the thread
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      in_flight_ = false;
      if (error) {
        error_ = error;  // next() rethrows it once the batches before this one are handed out
        pending_.clear();
      } else {
        ready_.push_back(std::move(job));
      }
    }
    cv_.notify_all();
    if (error) return;
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

void DataLoader::release_prefetched() {
  // Where the stopped worker left each batch (filled or not) depends on its timing; the batches
  // are freed in batch order whatever it was, so the frees too are the same on every run.
  std::vector<std::pair<size_t, Example>> batches;
  for (auto* queue : {&ready_, &pending_}) {
    for (auto& job : *queue) batches.push_back(std::move(job));
    queue->clear();
  }
  std::sort(batches.begin(), batches.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [index, batch] : batches) {
    Example released = std::move(batch);  // frees its target, then its input
  }
}

void DataLoader::wait_until_prefetched() {
  if (options_.prefetch == 0) return;
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return stop_ || error_ || (pending_.empty() && !in_flight_); });
}

std::optional<Example> DataLoader::next() {
  if (next_batch_ >= num_batches()) return std::nullopt;
  Example batch;
  if (options_.prefetch == 0) {
    batch = make_batch(next_batch_);
  } else {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return !ready_.empty() || error_; });
      if (ready_.empty()) std::rethrow_exception(error_);
      batch = std::move(ready_.front().second);
      ready_.pop_front();
    }
    // The buffers of the batch `prefetch` ahead are allocated here, on this thread, after the
    // batch handed out: the same allocation order on every run.
    schedule_next();
  }
  ++next_batch_;
  return deliver(std::move(batch));
}

}  // namespace memgrad::data
