// A number passed to an op (add(x, 2.5), fill_(0), clamp(x, 0, 6)): a double, an int64 or a
// bool, converted to the tensor's dtype by the op.
#pragma once

#include <cstdint>
#include <type_traits>

namespace memgrad {

class Scalar {
 public:
  Scalar() = default;
  template <typename T>
    requires std::is_arithmetic_v<T>
  Scalar(T value) {  // NOLINT: implicit, so add(x, 2) reads naturally
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = Kind::Bool;
      i_ = value ? 1 : 0;
      d_ = i_;
    } else if constexpr (std::is_integral_v<T>) {
      kind_ = Kind::Int;
      i_ = static_cast<int64_t>(value);
      d_ = static_cast<double>(value);
    } else {
      kind_ = Kind::Float;
      d_ = static_cast<double>(value);
      i_ = static_cast<int64_t>(value);
    }
  }

  double to_double() const { return d_; }
  int64_t to_int() const { return i_; }
  bool to_bool() const { return d_ != 0.0; }
  bool is_floating() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_bool() const { return kind_ == Kind::Bool; }

 private:
  enum class Kind : uint8_t { Float, Int, Bool };
  Kind kind_ = Kind::Float;
  double d_ = 0.0;
  int64_t i_ = 0;
};

}  // namespace memgrad
