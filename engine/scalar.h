// A number passed to an op (add(x, 2.5), fill_(0), clamp(x, 0, 6)): a double, an int64 or a
// bool, converted to the tensor's dtype by the op.
//
// The value keeps its kind: an integer stays an int64 (so int64_tensor - 1 stays int64) and a
// double is never cast to an integer until an op asks for one, with a check (a double such as
// -inf, which a causal mask fills with, has no int64 value).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/dtype.h"

namespace memgrad {

class Scalar {
 public:
  Scalar() = default;
  template <typename T>
  requires std::is_arithmetic_v<T> Scalar(
      T value) {  // NOLINT: implicit, so add(x, 2) reads naturally
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = Kind::Bool;
      i_ = value ? 1 : 0;
    } else if constexpr (std::is_integral_v<T>) {
      kind_ = Kind::Int;
      i_ = static_cast<int64_t>(value);  // an unsigned value above 2^63 wraps (C++20: modular)
    } else {
      kind_ = Kind::Float;
      d_ = static_cast<double>(value);
    }
  }

  double to_double() const { return kind_ == Kind::Float ? d_ : static_cast<double>(i_); }
  // The value as an int64: an integer as it is, a double truncated toward zero. Throws
  // ValueError when a double is NaN, infinite or outside int64 (PyTorch: "value cannot be
  // converted to type int64_t without overflow").
  int64_t to_int() const;
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0.0 : i_ != 0; }
  bool is_floating() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_bool() const { return kind_ == Kind::Bool; }

  // -value, of the same kind (a bool negates to an int, as in Python). Throws ValueError for
  // -INT64_MIN.
  Scalar negated() const;

  // Throws ValueError naming `op` when the value cannot be stored in `dtype`: NaN, infinities
  // and values outside int64 for int64 tensors. Floating dtypes take any value (float32 and
  // float16 round an out-of-range value to infinity, as PyTorch does).
  void check_fits(DType dtype, const char* op) const;

 private:
  enum class Kind : uint8_t { Float, Int, Bool };
  Kind kind_ = Kind::Float;
  double d_ = 0.0;  // the value when kind_ is Float
  int64_t i_ = 0;   // the value when kind_ is Int or Bool
};

}  // namespace memgrad
