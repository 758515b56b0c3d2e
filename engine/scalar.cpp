// Scalar conversions that can fail.
#include "engine/scalar.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "engine/dtype.h"
#include "engine/error.h"

namespace memgrad {
namespace {

// Whether a double has an int64 value after truncation: [-2^63, 2^63), and not NaN.
bool fits_int64(double v) {
  constexpr double kTwoTo63 = 9223372036854775808.0;
  return v >= -kTwoTo63 && v < kTwoTo63;  // false for NaN
}

}  // namespace

int64_t Scalar::to_int() const {
  if (kind_ != Kind::Float) return i_;
  if (!fits_int64(d_)) {
    throw ValueError(
        fmt::format("value cannot be converted to type int64 without overflow: {}", d_), "",
        "value", fmt::format("{}", d_));
  }
  return static_cast<int64_t>(d_);
}

Scalar Scalar::negated() const {
  if (kind_ == Kind::Float) return Scalar(-d_);
  if (i_ == std::numeric_limits<int64_t>::min()) {
    throw ValueError(fmt::format("cannot negate {}: the result is outside int64", i_), "", "value",
                     fmt::format("{}", i_));
  }
  return Scalar(-i_);
}

void Scalar::check_fits(DType dtype, const char* op) const {
  if (dtype == DType::Int64 && kind_ == Kind::Float && !fits_int64(d_)) {
    throw ValueError(
        fmt::format("[{}] value cannot be converted to type int64 without overflow: {}", op, d_),
        op, "value", fmt::format("{}", d_));
  }
}

}  // namespace memgrad
