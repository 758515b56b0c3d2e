// Datasets: a size and an item per index, produced on demand.
//
// A Dataset does not have to hold its data in memory: get(i) may read, decode or generate item
// i when asked, which keeps memory flat however large the data set is (behaviour B16). Batches
// are built by get_batch (default: stack the items), which datasets that do hold their data in
// tensors override with one gather. The DataLoader's prefetch thread instead fills batch tensors
// that the calling thread allocated (empty_batch, fill_batch), so every allocation happens on the
// training thread in the same order on every run, as with PyTorch's worker processes, whose
// memory is not the device allocator's.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace memgrad::data {

// One example, or one batch of them (inputs stacked along a new first dimension).
struct Example {
  Tensor input;
  Tensor target;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual size_t size() const = 0;
  // Item i (0 <= i < size()). Throws IndexError otherwise.
  virtual Example get(size_t i) const = 0;
  // The items at `indices`, stacked. Allocates: the batch tensors.
  virtual Example get_batch(const std::vector<size_t>& indices) const;
  // Uninitialised tensors for a batch of n items (the item shapes with n in front). The default
  // asks get(0) for the shapes. Allocates: the batch tensors.
  virtual Example empty_batch(size_t n) const;
  // Writes the items at `indices` into `out` (from empty_batch(indices.size())). The default
  // copies item by item: whatever get() allocates is allocated on the calling thread.
  virtual void fill_batch(const std::vector<size_t>& indices, Example& out) const;
};

// A dataset over two tensors whose first dimension indexes examples.
class TensorDataset final : public Dataset {
 public:
  // Throws ShapeError when the first dimensions differ.
  TensorDataset(Tensor inputs, Tensor targets);
  size_t size() const override;
  Example get(size_t i) const override;
  // One index_select per tensor (no per-item tensors). Its items are views, so the default
  // fill_batch allocates nothing.
  Example get_batch(const std::vector<size_t>& indices) const override;
  const Tensor& inputs() const { return inputs_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor inputs_, targets_;
};

}  // namespace memgrad::data
