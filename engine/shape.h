// Sizes and strides: a small fixed-capacity vector and the pure arithmetic on layouts.
//
// A tensor's layout is plain data: sizes (extent per dimension), strides (in elements, how far
// to move in storage for one step along each dimension) and a storage offset (in elements).
// A view is new layout data over the same storage, so everything here is allocation-free and
// unit-testable on its own. At most kMaxDims (8) dimensions.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "kernels/kernel_args.h"

namespace memgrad {

// Up to kMaxDims int64 values, stored inline (no heap allocation per tensor).
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> values);  // NOLINT: implicit, as in t.view({2, 3})
  Shape(std::span<const int64_t> values);        // NOLINT
  Shape(const std::vector<int64_t>& values) : Shape(std::span<const int64_t>(values)) {}  // NOLINT
  // `n` copies of `value`.
  static Shape filled(int n, int64_t value);

  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t operator[](int i) const { return values_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return values_[static_cast<size_t>(i)]; }
  const int64_t* begin() const { return values_.data(); }
  const int64_t* end() const { return values_.data() + n_; }
  int64_t* begin() { return values_.data(); }
  int64_t* end() { return values_.data() + n_; }
  const int64_t* data() const { return values_.data(); }
  int64_t back() const { return values_[static_cast<size_t>(n_ - 1)]; }

  // Throws ShapeError beyond kMaxDims.
  void push_back(int64_t value);
  void insert(int pos, int64_t value);
  void erase(int pos);
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  operator std::span<const int64_t>() const { return {begin(), end()}; }  // NOLINT

  bool operator==(const Shape& other) const;

 private:
  std::array<int64_t, kMaxDims> values_{};
  int n_ = 0;
};

// "[2, 3]", as PyTorch prints torch.Size.
std::string to_string(const Shape& shape);

// Product of sizes (1 for a 0-d shape, 0 when any size is 0). Throws ShapeError when the product
// overflows int64 (PyTorch: "numel: integer multiplication overflow"); every TensorImpl computes
// its numel here, so no tensor, view or expansion holds a wrapped count.
int64_t numel_of(const Shape& sizes);

// Row-major strides for `sizes`, in elements.
Shape contiguous_strides(const Shape& sizes);

// Whether (sizes, strides) is row-major contiguous (size-1 dimensions may have any stride).
bool is_contiguous_layout(const Shape& sizes, const Shape& strides);

// The broadcast shape of a and b (PyTorch rules: align right, sizes equal or 1). Throws
// ShapeError naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Strides that make (sizes, strides) read as `target` sizes with stride 0 along broadcast
// dimensions. Requires broadcast_shapes(sizes, target) == target.
Shape broadcast_strides(const Shape& sizes, const Shape& strides, const Shape& target);

// Wraps a possibly negative dimension into [0, ndim). Throws IndexError naming `op`.
int wrap_dim(int64_t dim, int ndim, const char* op);

// Resolves one -1 in `target` against `numel`. Throws ShapeError if the sizes do not match.
Shape infer_size(const Shape& target, int64_t numel, const char* op);

// Strides for viewing (sizes, strides) as `target` without copying, or nullopt-like empty
// result when the layout makes that impossible (PyTorch's computeStride). `ok` reports which.
Shape view_strides(const Shape& sizes, const Shape& strides, const Shape& target, bool& ok);

}  // namespace memgrad
