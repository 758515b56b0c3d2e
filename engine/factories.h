// Creating tensors. Every factory allocates numel x element size on the requested device
// (rounded as the device's allocator rounds); none aliases anything. The in-place random fills
// (uniform_, normal_) live here too, next to the random factories that share their generator.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/generator.h"
#include "engine/scalar.h"
#include "engine/shape.h"
#include "engine/tensor.h"

namespace memgrad {

// dtype (default float32, or inferred where a factory says so), device (default cpu) and
// whether the new tensor is a leaf that requires grad.
struct TensorOptions {
  std::optional<DType> dtype;
  Device device = kCPU;
  bool requires_grad = false;

  TensorOptions() = default;
  TensorOptions(DType d) : dtype(d) {}    // NOLINT: implicit, as in zeros({2}, kInt64)
  TensorOptions(Device d) : device(d) {}  // NOLINT
  TensorOptions& with_dtype(DType d) {
    dtype = d;
    return *this;
  }
  TensorOptions& with_device(Device d) {
    device = d;
    return *this;
  }
  TensorOptions& with_requires_grad(bool r = true) {
    requires_grad = r;
    return *this;
  }
  DType dtype_or(DType fallback) const { return dtype.value_or(fallback); }
};

// Uninitialised values. Throws ShapeError for negative sizes, OutOfMemoryError.
Tensor empty(const Shape& sizes, const TensorOptions& options = {});
Tensor zeros(const Shape& sizes, const TensorOptions& options = {});
Tensor ones(const Shape& sizes, const TensorOptions& options = {});
Tensor full(const Shape& sizes, Scalar value, const TensorOptions& options = {});
// Same sizes, dtype and device as `like` unless options say otherwise.
Tensor empty_like(const Tensor& like, std::optional<DType> dtype = std::nullopt);
Tensor zeros_like(const Tensor& like, std::optional<DType> dtype = std::nullopt);
Tensor ones_like(const Tensor& like, std::optional<DType> dtype = std::nullopt);
Tensor full_like(const Tensor& like, Scalar value);

// start, start + step, ... below end. int64 when start, end and step are all integers and no
// dtype is given, float32 otherwise. Throws ValueError for step 0 or a wrong-way step.
Tensor arange(Scalar end, const TensorOptions& options = {});
Tensor arange(Scalar start, Scalar end, Scalar step = 1, const TensorOptions& options = {});
// `steps` evenly spaced values from start to end inclusive.
Tensor linspace(double start, double end, int64_t steps, const TensorOptions& options = {});
// n x m identity (m = n when m < 0).
Tensor eye(int64_t n, int64_t m = -1, const TensorOptions& options = {});

// Random tensors from `generator` (the device's default generator when null).
Tensor rand(const Shape& sizes, const TensorOptions& options = {}, Generator* generator = nullptr);
Tensor randn(const Shape& sizes, const TensorOptions& options = {}, Generator* generator = nullptr);
// Integers in [low, high), int64 unless a dtype is given.
Tensor randint(int64_t low, int64_t high, const Shape& sizes, const TensorOptions& options = {},
               Generator* generator = nullptr);
Tensor rand_like(const Tensor& like, Generator* generator = nullptr);
Tensor randn_like(const Tensor& like, Generator* generator = nullptr);
// Fills self in place with U[from, to) / N(mean, std) from the device's default generator;
// Tensor's uniform_ / normal_ forward here. Allocates: nothing for a contiguous self, otherwise
// a temporary of self's size, freed before return. Version: bumps self's. Saves (autograd):
// nothing; the gradient through self is zero.
Tensor& uniform_(Tensor& self, double from = 0.0, double to = 1.0);
Tensor& normal_(Tensor& self, double mean = 0.0, double std = 1.0);

// A tensor holding `values` with the given sizes (default: 1-d). Throws ShapeError if the sizes
// do not hold values.size() elements. The dtype defaults to the C++ type's.
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes = {},
                   const TensorOptions& options = {});

// Literals for tests and examples: tensor({1.f, 2.f}), tensor({{1, 2}, {3, 4}}). Floating
// literals give float32, integer literals int64, unless options say otherwise.
Tensor tensor(std::initializer_list<double> values, const TensorOptions& options = {});
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows,
              const TensorOptions& options = {});
Tensor tensor(std::initializer_list<int64_t> values, const TensorOptions& options = {});
Tensor tensor(std::initializer_list<int> values, const TensorOptions& options = {});
// A 0-d tensor.
Tensor scalar_tensor(Scalar value, const TensorOptions& options = {});

}  // namespace memgrad
