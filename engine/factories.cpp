// Factories: allocate, then fill with a kernel (constants, ranges, random draws).
#include "engine/factories.h"

#include <cmath>

#include <fmt/format.h>

#include "allocator/trace.h"
#include "engine/copy.h"
#include "engine/error.h"
#include "engine/op_support.h"

namespace memgrad {
namespace {

using detail::kernels_for;
using detail::operand;

Tensor make(const char* op, const Shape& sizes, DType dtype, const TensorOptions& options) {
  for (int64_t s : sizes) {
    if (s < 0) {
      throw ShapeError(
          fmt::format("[{}] negative dimension {} in size {}", op, s, to_string(sizes)), op,
          ShapeRoles::given(sizes));
    }
  }
  TraceOpScope trace(op);
  Tensor t = detail::new_tensor(sizes, dtype, options.device);
  return t;
}

Tensor finish(Tensor t, const TensorOptions& options) {
  if (options.requires_grad) t.requires_grad_(true);
  return t;
}

Tensor filled(const char* op, const Shape& sizes, double value, DType dtype,
              const TensorOptions& options) {
  Tensor t = make(op, sizes, dtype, options);
  if (t.numel() > 0) kernels_for(t.device()).fill(operand(t), value);
  return finish(std::move(t), options);
}

// A 1-d tensor of `n` values value(0) .. value(n - 1), computed on the host in float64 and then
// converted to the requested dtype and device. The float64 buffer comes from the allocator, so an
// absurd `n` is a typed error rather than a failed std::vector.
template <typename ValueAt>
Tensor from_values(const char* op, int64_t n, ValueAt value, const TensorOptions& options) {
  Tensor t = make(op, {n}, kFloat64, TensorOptions(kCPU));
  double* out = t.data_ptr<double>();
  for (int64_t i = 0; i < n; ++i) out[i] = value(i);
  const DType dtype = options.dtype_or(kFloat32);
  if (dtype != kFloat64) t = to_dtype(t, dtype);
  if (options.device != kCPU) t = to_device(t, options.device);
  return finish(std::move(t), options);
}

// Reserves the Philox counters for `numel` values from the device's generator (or `generator`).
std::pair<uint64_t, uint64_t> draw(Generator* generator, Device device, int64_t numel) {
  Generator& g = generator != nullptr ? *generator : default_generator(device);
  const uint64_t counters = static_cast<uint64_t>(numel + 3) / 4;
  const uint64_t offset = g.advance(counters);
  return {g.seed(), offset};
}

}  // namespace

Tensor empty(const Shape& sizes, const TensorOptions& options) {
  return finish(make("empty", sizes, options.dtype_or(kFloat32), options), options);
}
Tensor zeros(const Shape& sizes, const TensorOptions& options) {
  return filled("zeros", sizes, 0.0, options.dtype_or(kFloat32), options);
}
Tensor ones(const Shape& sizes, const TensorOptions& options) {
  return filled("ones", sizes, 1.0, options.dtype_or(kFloat32), options);
}
Tensor full(const Shape& sizes, Scalar value, const TensorOptions& options) {
  // Like torch.full: the dtype follows the value when not given.
  const DType inferred = value.is_bool() ? kBool : value.is_integral() ? kInt64 : kFloat32;
  value.check_fits(options.dtype_or(inferred), "full");
  return filled("full", sizes, value.to_double(), options.dtype_or(inferred), options);
}

Tensor empty_like(const Tensor& like, std::optional<DType> dtype) {
  return empty(like.sizes(),
               TensorOptions(dtype.value_or(like.dtype())).with_device(like.device()));
}
Tensor zeros_like(const Tensor& like, std::optional<DType> dtype) {
  return zeros(like.sizes(),
               TensorOptions(dtype.value_or(like.dtype())).with_device(like.device()));
}
Tensor ones_like(const Tensor& like, std::optional<DType> dtype) {
  return ones(like.sizes(), TensorOptions(dtype.value_or(like.dtype())).with_device(like.device()));
}
Tensor full_like(const Tensor& like, Scalar value) {
  return full(like.sizes(), value, TensorOptions(like.dtype()).with_device(like.device()));
}

Tensor arange(Scalar end, const TensorOptions& options) {
  return arange(Scalar(int64_t{0}), end, Scalar(int64_t{1}), options);
}

Tensor arange(Scalar start, Scalar end, Scalar step, const TensorOptions& options) {
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  if (!std::isfinite(s) || !std::isfinite(e) || !std::isfinite(st)) {
    throw ValueError(fmt::format("[arange] unsupported range: {} -> {} with step {}", s, e, st),
                     "arange", "end", fmt::format("{}", e));
  }
  if (st == 0.0) throw ValueError("[arange] step must be nonzero", "arange", "step", "0");
  if ((e - s) * st < 0.0) {
    throw ValueError(fmt::format("[arange] upper bound and step sign are inconsistent: start {}, "
                                 "end {}, step {}",
                                 s, e, st),
                     "arange", "end", fmt::format("{}", e));
  }
  const bool integral = !start.is_floating() && !end.is_floating() && !step.is_floating();
  const DType dtype = options.dtype_or(integral ? kInt64 : kFloat32);
  const double count = std::ceil((e - s) / st);
  if (!(count < 9223372036854775808.0)) {  // 2^63; also catches an infinite quotient
    throw ValueError(
        fmt::format("[arange] {} -> {} with step {} has more than 2^63 - 1 elements", s, e, st),
        "arange", "end", fmt::format("{}", e));
  }
  const auto n = std::max<int64_t>(static_cast<int64_t>(count), 0);
  return from_values(
      "arange", n, [&](int64_t i) { return s + st * static_cast<double>(i); },
      TensorOptions(dtype).with_device(options.device).with_requires_grad(options.requires_grad));
}

Tensor linspace(double start, double end, int64_t steps, const TensorOptions& options) {
  if (steps < 0)
    throw ValueError(fmt::format("[linspace] number of steps must be >= 0, got {}", steps),
                     "linspace", "steps", fmt::format("{}", steps));
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  // Filled from both ends, as PyTorch does, so the last value is exactly `end`; one step is
  // `start` (PyTorch and NumPy).
  auto value = [&](int64_t i) {
    if (steps == 1) return start;
    return i < steps / 2 ? start + step * static_cast<double>(i)
                         : end - step * static_cast<double>(steps - 1 - i);
  };
  return from_values("linspace", steps, value,
                     TensorOptions(options.dtype_or(kFloat32))
                         .with_device(options.device)
                         .with_requires_grad(options.requires_grad));
}

Tensor eye(int64_t n, int64_t m, const TensorOptions& options) {
  if (m < 0) m = n;
  if (n < 0)
    throw ShapeError(fmt::format("[eye] n must be >= 0, got {}", n), "eye",
                     ShapeRoles::given(Shape{n, m}));
  Tensor t = zeros({n, m}, TensorOptions(options.dtype_or(kFloat32)).with_device(options.device));
  if (t.numel() > 0) t.diagonal().fill_(1);
  return finish(std::move(t), options);
}

Tensor rand(const Shape& sizes, const TensorOptions& options, Generator* generator) {
  Tensor t = make("rand", sizes, options.dtype_or(kFloat32), options);
  const auto [seed, offset] = draw(generator, t.device(), t.numel());
  if (t.numel() > 0) kernels_for(t.device()).uniform(operand(t), seed, offset, 0.0, 1.0);
  return finish(std::move(t), options);
}

Tensor randn(const Shape& sizes, const TensorOptions& options, Generator* generator) {
  Tensor t = make("randn", sizes, options.dtype_or(kFloat32), options);
  const auto [seed, offset] = draw(generator, t.device(), t.numel());
  if (t.numel() > 0) kernels_for(t.device()).normal(operand(t), seed, offset, 0.0, 1.0);
  return finish(std::move(t), options);
}

Tensor randint(int64_t low, int64_t high, const Shape& sizes, const TensorOptions& options,
               Generator* generator) {
  if (high <= low) {
    throw ValueError(
        fmt::format("[randint] expected low < high, got low {} and high {}", low, high), "randint",
        "high", fmt::format("{}", high));
  }
  if (high - low > (int64_t{1} << 32)) {
    throw ValueError(fmt::format("[randint] the range [{}, {}) is wider than 2^32", low, high),
                     "randint", "high", fmt::format("{}", high));
  }
  Tensor t = make("randint", sizes, options.dtype_or(kInt64), options);
  const auto [seed, offset] = draw(generator, t.device(), t.numel());
  if (t.numel() > 0) kernels_for(t.device()).randint(operand(t), seed, offset, low, high);
  return finish(std::move(t), options);
}

Tensor rand_like(const Tensor& like, Generator* generator) {
  return rand(like.sizes(), TensorOptions(like.dtype()).with_device(like.device()), generator);
}
Tensor randn_like(const Tensor& like, Generator* generator) {
  return randn(like.sizes(), TensorOptions(like.dtype()).with_device(like.device()), generator);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes, const TensorOptions& options) {
  const Shape shape =
      sizes.empty() && values.size() != 1 ? Shape{static_cast<int64_t>(values.size())} : sizes;
  if (numel_of(shape) != static_cast<int64_t>(values.size())) {
    throw ShapeError(fmt::format("[from_vector] {} values cannot fill a tensor of shape {}",
                                 values.size(), to_string(shape)),
                     "from_vector", ShapeRoles::given(shape));
  }
  constexpr DType natural = [] {
    if constexpr (std::is_same_v<T, int>) {
      return DType::Int64;
    } else {
      return dtype_of<T>();
    }
  }();
  // Wrap the values as a host tensor of their own type, then convert / move as requested.
  Tensor host = make("tensor", shape, natural, TensorOptions(kCPU));
  char* dst = static_cast<char*>(host.data_ptr());
  for (size_t i = 0; i < values.size(); ++i) {
    if constexpr (std::is_same_v<T, int>) {
      reinterpret_cast<int64_t*>(dst)[i] = values[i];
    } else {
      reinterpret_cast<T*>(dst)[i] = values[i];
    }
  }
  Tensor t = host;
  const DType dtype = options.dtype_or(natural);
  if (dtype != natural) t = to_dtype(t, dtype);
  if (options.device != kCPU) t = to_device(t, options.device);
  return finish(std::move(t), options);
}

template Tensor from_vector<float>(const std::vector<float>&, const Shape&, const TensorOptions&);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, const TensorOptions&);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&,
                                     const TensorOptions&);
template Tensor from_vector<int>(const std::vector<int>&, const Shape&, const TensorOptions&);

Tensor tensor(std::initializer_list<double> values, const TensorOptions& options) {
  const std::vector<double> v(values);
  return from_vector(v, {static_cast<int64_t>(v.size())},
                     TensorOptions(options).with_dtype(options.dtype_or(kFloat32)));
}

Tensor tensor(std::initializer_list<std::initializer_list<double>> rows,
              const TensorOptions& options) {
  std::vector<double> v;
  const size_t cols = rows.size() == 0 ? 0 : rows.begin()->size();
  for (const auto& row : rows) {
    if (row.size() != cols) {
      throw ShapeError(
          fmt::format("[tensor] rows have different lengths ({} and {})", cols, row.size()),
          "tensor",
          ShapeRoles::wanted(Shape{static_cast<int64_t>(cols)},
                             Shape{static_cast<int64_t>(row.size())}));
    }
    v.insert(v.end(), row.begin(), row.end());
  }
  return from_vector(v, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols)},
                     TensorOptions(options).with_dtype(options.dtype_or(kFloat32)));
}

Tensor tensor(std::initializer_list<int64_t> values, const TensorOptions& options) {
  const std::vector<int64_t> v(values);
  return from_vector(v, {static_cast<int64_t>(v.size())}, options);
}

Tensor tensor(std::initializer_list<int> values, const TensorOptions& options) {
  const std::vector<int> v(values);
  return from_vector(v, {static_cast<int64_t>(v.size())}, options);
}

Tensor scalar_tensor(Scalar value, const TensorOptions& options) {
  return full({}, value, options);
}

// ---- in-place random fills ----

Tensor& uniform_(Tensor& self, double from, double to) {
  TraceOpScope trace("uniform_");
  // Its gradient is zero, as for fill_; the leaf checks apply (use NoGradGuard in init code).
  detail::InplaceRecord rec(OpKind::Fill, self, {}, FillAttrs{});
  Tensor target =
      self.is_contiguous() ? self : detail::new_tensor(self.sizes(), self.dtype(), self.device());
  const auto [seed, offset] = draw(nullptr, self.device(), self.numel());
  if (self.numel() > 0) {
    kernels_for(self.device()).uniform(operand(target), seed, offset, from, to);
  }
  if (!target.is_same(self)) {
    kernels_for(self.device()).copy(operand(self), operand(target));
  }
  rec.finish(self);
  return self;
}

Tensor& normal_(Tensor& self, double mean, double std) {
  TraceOpScope trace("normal_");
  // Its gradient is zero, as for fill_; the leaf checks apply (use NoGradGuard in init code).
  detail::InplaceRecord rec(OpKind::Fill, self, {}, FillAttrs{});
  Tensor target =
      self.is_contiguous() ? self : detail::new_tensor(self.sizes(), self.dtype(), self.device());
  const auto [seed, offset] = draw(nullptr, self.device(), self.numel());
  if (self.numel() > 0) {
    kernels_for(self.device()).normal(operand(target), seed, offset, mean, std);
  }
  if (!target.is_same(self)) {
    kernels_for(self.device()).copy(operand(self), operand(target));
  }
  rec.finish(self);
  return self;
}

}  // namespace memgrad
