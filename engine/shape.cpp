// Layout arithmetic: broadcasting, contiguity, view compatibility.
#include "engine/shape.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/error.h"

namespace memgrad {
namespace {

[[noreturn]] void too_many_dims(int n) {
  throw ShapeError(
      fmt::format("[shape] {} dimensions requested; memgrad supports at most {}", n, kMaxDims),
      "shape", ShapeRoles{});
}

}  // namespace

Shape::Shape(std::initializer_list<int64_t> values) : Shape(std::span<const int64_t>(values)) {}

Shape::Shape(std::span<const int64_t> values) {
  if (values.size() > kMaxDims) too_many_dims(static_cast<int>(values.size()));
  n_ = static_cast<int>(values.size());
  for (size_t i = 0; i < values.size(); ++i) values_[i] = values[i];
}

Shape Shape::filled(int n, int64_t value) {
  if (n > kMaxDims) too_many_dims(n);
  Shape s;
  s.n_ = n;
  for (int i = 0; i < n; ++i) s.values_[static_cast<size_t>(i)] = value;
  return s;
}

void Shape::push_back(int64_t value) {
  if (n_ == kMaxDims) too_many_dims(n_ + 1);
  values_[static_cast<size_t>(n_++)] = value;
}

void Shape::insert(int pos, int64_t value) {
  if (n_ == kMaxDims) too_many_dims(n_ + 1);
  for (int i = n_; i > pos; --i)
    values_[static_cast<size_t>(i)] = values_[static_cast<size_t>(i - 1)];
  values_[static_cast<size_t>(pos)] = value;
  ++n_;
}

void Shape::erase(int pos) {
  for (int i = pos; i + 1 < n_; ++i)
    values_[static_cast<size_t>(i)] = values_[static_cast<size_t>(i + 1)];
  --n_;
}

bool Shape::operator==(const Shape& other) const {
  if (n_ != other.n_) return false;
  for (int i = 0; i < n_; ++i) {
    if ((*this)[i] != other[i]) return false;
  }
  return true;
}

std::string to_string(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int64_t numel_of(const Shape& sizes) {
  // A zero anywhere makes an empty tensor, however large the other sizes.
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return 0;
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (__builtin_mul_overflow(n, s, &n)) {
      throw ShapeError(fmt::format("[numel] integer multiplication overflow: sizes {} hold more "
                                   "than 2^63 - 1 elements",
                                   to_string(sizes)),
                       "numel", ShapeRoles::given(sizes));
    }
  }
  return n;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides = Shape::filled(sizes.size(), 1);
  int64_t running = 1;
  for (int d = sizes.size() - 1; d >= 0; --d) {
    strides[d] = running;
    // Only an empty tensor can have sizes whose product overflows (numel_of refuses the rest);
    // its strides address nothing, so they saturate instead of wrapping.
    if (__builtin_mul_overflow(running, std::max<int64_t>(sizes[d], 1), &running)) {
      running = std::numeric_limits<int64_t>::max();
    }
  }
  return strides;
}

bool is_contiguous_layout(const Shape& sizes, const Shape& strides) {
  int64_t expected = 1;
  for (int d = sizes.size() - 1; d >= 0; --d) {
    if (sizes[d] == 0) return true;
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int n = std::max(a.size(), b.size());
  Shape out = Shape::filled(n, 1);
  for (int i = 0; i < n; ++i) {
    const int ia = a.size() - n + i;
    const int ib = b.size() - n + i;
    const int64_t sa = ia >= 0 ? a[ia] : 1;
    const int64_t sb = ib >= 0 ? b[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      throw ShapeError(
          fmt::format(
              "[{}] shapes {} and {} cannot be broadcast: size {} and size {} at dimension {}", op,
              to_string(a), to_string(b), sa, sb, i),
          op, ShapeRoles::operands(a, b));
    }
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

Shape broadcast_strides(const Shape& sizes, const Shape& strides, const Shape& target) {
  const int n = target.size();
  Shape out = Shape::filled(n, 0);
  for (int i = 0; i < n; ++i) {
    const int src = sizes.size() - n + i;
    if (src >= 0 && sizes[src] == target[i]) out[i] = strides[src];
  }
  return out;
}

int wrap_dim(int64_t dim, int ndim, const char* op) {
  const int64_t n = std::max(ndim, 1);  // a 0-d tensor accepts dim 0 and -1, like PyTorch
  if (dim < -n || dim >= n) throw IndexError::dim_out_of_range(op, dim, ndim);
  return static_cast<int>(dim < 0 ? dim + n : dim);
}

Shape infer_size(const Shape& target, int64_t numel, const char* op) {
  Shape out = target;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (infer >= 0) {
        throw ShapeError(fmt::format("[{}] only one dimension can be inferred", op), op,
                         ShapeRoles::wanted(target));
      }
      infer = i;
    } else if (target[i] < 0) {
      throw ShapeError(
          fmt::format("[{}] invalid shape dimension {} in {}", op, target[i], to_string(target)),
          op, ShapeRoles::wanted(target));
    } else if (__builtin_mul_overflow(known, target[i], &known)) {
      throw ShapeError(fmt::format("[{}] shape {} is invalid for input of size {}: its sizes "
                                   "overflow int64",
                                   op, to_string(target), numel),
                       op, ShapeRoles::wanted(target));
    }
  }
  if (infer >= 0 && known != 0 && numel % known == 0) {
    out[infer] = numel / known;
    return out;
  }
  if (infer < 0 && known == numel) return out;
  throw ShapeError(
      fmt::format("[{}] shape {} is invalid for input of size {}", op, to_string(target), numel),
      op, ShapeRoles::wanted(target));
}

Shape view_strides(const Shape& sizes, const Shape& strides, const Shape& target, bool& ok) {
  // PyTorch's computeStride: walk the old dimensions in chunks that are contiguous with each
  // other; every new dimension must be carved out of exactly one chunk.
  ok = true;
  if (sizes.empty()) return Shape::filled(target.size(), 1);
  if (numel_of(sizes) == 0) return sizes == target ? strides : contiguous_strides(target);
  Shape out = Shape::filled(target.size(), 0);
  int view_d = target.size() - 1;
  int64_t chunk_base_stride = sizes.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int d = sizes.size() - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    // A chunk ends where the next-outer dimension is not contiguous with this one.
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || target[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= target[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) {
        ok = false;
        return {};
      }
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) {
    ok = false;
    return {};
  }
  return out;
}

}  // namespace memgrad
