// The reductions' per-element and combining formulas, written once for both backends
// (kernels/cpu/reduce.cpp and softmax.cpp, kernels/cuda/reduce.cu and softmax.cu): the folds
// (sum, prod, max, min, any, all) as an identity and a combine, max/min with NaN propagation,
// the terms and the finish of p-norms, and var's divisor and squared deviation. The backends
// differ in the order they combine partial results (lanes and chunks on the CPU, thread groups
// on the GPU), so floating sums can differ in the last bits; what they combine is this file.
// Nothing here allocates.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/scalar_math.h"

namespace memgrad::kernels {

// ---- folds: sum, prod, max, min, any, all ----

enum class Fold : uint8_t { Sum, Prod, Max, Min, Any, All };

// The larger (kIsMax) or smaller of acc and x; a NaN wins and then stays (PyTorch's max/min).
template <bool kIsMax, typename C>
MEMGRAD_HOST_DEVICE inline C pick(C acc, C x) {
  const bool better = kIsMax ? x > acc : x < acc;
  return (better || is_nan(x)) ? x : acc;
}

// -inf for floating C, the lowest value otherwise (the identity of max); mirrored for min.
template <bool kIsMax, typename C>
MEMGRAD_HOST_DEVICE constexpr C extreme_identity() {
  if constexpr (std::is_floating_point_v<C>) {
    return kIsMax ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
  } else {
    return kIsMax ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
  }
}

// The identity of fold F in accumulator type A.
template <Fold F, typename A>
MEMGRAD_HOST_DEVICE constexpr A fold_identity() {
  if constexpr (F == Fold::Sum) return A(0);
  if constexpr (F == Fold::Prod) return A(1);
  if constexpr (F == Fold::Max) return extreme_identity<true, A>();
  if constexpr (F == Fold::Min) return extreme_identity<false, A>();
  if constexpr (F == Fold::Any) return A(false);
  return A(true);  // All
}

// Two partial results of fold F combined (a before b).
template <Fold F, typename A>
MEMGRAD_HOST_DEVICE inline A fold_combine(A a, A b) {
  if constexpr (F == Fold::Sum) return static_cast<A>(a + b);
  if constexpr (F == Fold::Prod) return static_cast<A>(a * b);
  if constexpr (F == Fold::Max) return pick<true>(a, b);
  if constexpr (F == Fold::Min) return pick<false>(a, b);
  if constexpr (F == Fold::Any) return a || b;
  return a && b;  // All
}

// ---- var / std ----

// PyTorch's divisor: max(N - correction, 0), so N <= correction gives inf (or nan for 0/0).
inline double var_divisor(int64_t n, int64_t correction) {
  return static_cast<double>(n - correction > 0 ? n - correction : 0);
}

// (x - mean)^2, var's second pass.
MEMGRAD_HOST_DEVICE inline double squared_deviation(double x, double mean) {
  const double d = x - mean;
  return d * d;
}

// The sum of squared deviations ss turned into the variance, or the standard deviation.
MEMGRAD_HOST_DEVICE inline double var_finish(double ss, double divisor, bool take_sqrt) {
  const double v = ss / divisor;
  return take_sqrt ? std::sqrt(v) : v;
}

// ---- p-norms: sum |x|^p (count of non-zeros for p = 0, max/min |x| for +-inf), in double ----

enum class NormKind : uint8_t { Zero, One, Two, Inf, NegInf, General };

inline NormKind norm_kind(double p) {
  if (p == 0.0) return NormKind::Zero;
  if (p == 1.0) return NormKind::One;
  if (p == 2.0) return NormKind::Two;
  if (std::isinf(p)) return p > 0 ? NormKind::Inf : NormKind::NegInf;
  return NormKind::General;
}

// The value a norm accumulates from before its first term: +inf for the -inf norm (a min).
MEMGRAD_HOST_DEVICE inline double norm_identity(NormKind kind) {
  return kind == NormKind::NegInf ? std::numeric_limits<double>::infinity() : 0.0;
}

// One element's term: 1 or 0 (p = 0), |x| (p = 1 and +-inf), x^2 (p = 2), |x|^p otherwise.
MEMGRAD_HOST_DEVICE inline double norm_term(NormKind kind, double p, double x) {
  switch (kind) {
    case NormKind::Zero: return x != 0.0 ? 1.0 : 0.0;
    case NormKind::One:
    case NormKind::Inf:
    case NormKind::NegInf: return std::abs(x);
    case NormKind::Two: return x * x;
    case NormKind::General: return std::pow(std::abs(x), p);
  }
  return 0.0;
}

// Two partial results combined: max (+inf), min (-inf) or sum.
MEMGRAD_HOST_DEVICE inline double norm_combine(NormKind kind, double a, double b) {
  if (kind == NormKind::Inf) return pick<true>(a, b);
  if (kind == NormKind::NegInf) return pick<false>(a, b);
  return a + b;
}

// The norm from the accumulated value: its square root (p = 2), its 1/p-th power (general p).
MEMGRAD_HOST_DEVICE inline double norm_finish(NormKind kind, double p, double value) {
  if (kind == NormKind::Two) return std::sqrt(value);
  if (kind == NormKind::General) return std::pow(value, 1.0 / p);
  return value;
}

}  // namespace memgrad::kernels
