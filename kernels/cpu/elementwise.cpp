// CPU elementwise kernels: unary, binary, scalar, clamp, where, and the unary backward rules.
//
// Three paths per op family, chosen per innermost row by LoopNest:
//   typed      every operand has the same dtype: a plain loop over T (vectorised by the
//              compiler when the row is contiguous or one input is broadcast along it);
//   eigen      contiguous float/double rows of transcendental ops use Eigen's vectorised
//              exp/log/tanh/logistic (for the backward, the tanh GELU's float rows);
//   mixed      operands of different dtypes: each element is loaded and converted to the
//              compute type, then stored converted to the output's dtype (no temporaries).
// Float16 rows compute in float. The formulas themselves (and the compute-type rules) are
// kernels/elementwise_formulas.h, shared with the CUDA backend; this file holds the loops.
#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/element_types.h"
#include "kernels/cpu/strided_iter.h"
#include "kernels/elementwise_formulas.h"

namespace memgrad::kernels::cpu {
namespace {

// ---- typed loops over one innermost row ----

// out[i] = f(a[i]) with out and a of storage type T, computing in compute_t<T>.
template <typename T, typename F>
void map1(char* o, const char* a, int64_t so, int64_t sa, int64_t n, F f) {
  using C = compute_t<T>;
  constexpr auto es = static_cast<int64_t>(sizeof(T));
  if (so == es && sa == es) {
    T* po = reinterpret_cast<T*>(o);
    const T* pa = reinterpret_cast<const T*>(a);
    for (int64_t i = 0; i < n; ++i) po[i] = static_cast<T>(f(static_cast<C>(pa[i])));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const C x = static_cast<C>(*reinterpret_cast<const T*>(a + i * sa));
    *reinterpret_cast<T*>(o + i * so) = static_cast<T>(f(x));
  }
}

// out[i] = f(a[i], b[i]), with fast paths for contiguous rows and a broadcast operand.
template <typename T, typename R, typename F>
void map2(char* o, const char* a, const char* b, int64_t so, int64_t sa, int64_t sb, int64_t n,
          F f) {
  using C = compute_t<T>;
  constexpr auto es = static_cast<int64_t>(sizeof(T));
  constexpr auto er = static_cast<int64_t>(sizeof(R));
  R* po = reinterpret_cast<R*>(o);
  const T* pa = reinterpret_cast<const T*>(a);
  const T* pb = reinterpret_cast<const T*>(b);
  if (so == er && sa == es && sb == es) {
    for (int64_t i = 0; i < n; ++i) po[i] = static_cast<R>(f(C(pa[i]), C(pb[i])));
  } else if (so == er && sa == es && sb == 0) {
    const C bv = C(*pb);
    for (int64_t i = 0; i < n; ++i) po[i] = static_cast<R>(f(C(pa[i]), bv));
  } else if (so == er && sa == 0 && sb == es) {
    const C av = C(*pa);
    for (int64_t i = 0; i < n; ++i) po[i] = static_cast<R>(f(av, C(pb[i])));
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const C x = C(*reinterpret_cast<const T*>(a + i * sa));
      const C y = C(*reinterpret_cast<const T*>(b + i * sb));
      *reinterpret_cast<R*>(o + i * so) = static_cast<R>(f(x, y));
    }
  }
}

// Eigen's vectorised transcendental functions on a contiguous float/double row: the formulas of
// elementwise_formulas.h as array expressions, with Eigen's exp, log and tanh in place of libm's
// (tests/engine/elementwise_test.cpp states how closely the two agree).
template <typename T>
bool eigen_unary(UnaryOp op, T* o, const T* x, int64_t n) {
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  Eigen::Map<Array> out(o, n);
  Eigen::Map<const Array> in(x, n);
  switch (op) {
    case UnaryOp::Exp: out = in.exp(); return true;
    case UnaryOp::Log: out = in.log(); return true;
    case UnaryOp::Sqrt: out = in.sqrt(); return true;
    case UnaryOp::Rsqrt: out = in.rsqrt(); return true;
    case UnaryOp::Tanh: out = in.tanh(); return true;
    // sigmoid_of's 1 / (1 + exp(-x)) with the vectorised exp: Eigen's logistic() is accurate
    // only in absolute terms for float (6e-5 relative near 1e-3, the tail silu multiplies).
    case UnaryOp::Sigmoid: out = (T(1) + (-in).exp()).inverse(); return true;
    case UnaryOp::Silu: out = in * (T(1) + (-in).exp()).inverse(); return true;
    case UnaryOp::GeluTanh:
      out = T(0.5) * in * (T(1) + (T(kSqrt2OverPi) * (in + T(kGeluCoeff) * in.cube())).tanh());
      return true;
    default: return false;
  }
}

template <typename T>
void unary_row(UnaryOp op, char* o, const char* a, int64_t so, int64_t sa, int64_t n) {
  constexpr auto es = static_cast<int64_t>(sizeof(T));
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (so == es && sa == es &&
        eigen_unary(op, reinterpret_cast<T*>(o), reinterpret_cast<const T*>(a), n)) {
      return;
    }
  }
  switch (op) {  // hoist the switch out of the loop for the cheap ops
    case UnaryOp::Neg: return map1<T>(o, a, so, sa, n, [](auto x) { return neg_of(x); });
    case UnaryOp::Relu: return map1<T>(o, a, so, sa, n, [](auto x) { return relu_of(x); });
    case UnaryOp::Abs: return map1<T>(o, a, so, sa, n, [](auto x) { return abs_of(x); });
    case UnaryOp::Square: return map1<T>(o, a, so, sa, n, [](auto x) { return square_of(x); });
    default: return map1<T>(o, a, so, sa, n, [op](auto x) { return unary_value(op, x); });
  }
}

// Elements per block of gelu_tanh_grad_float (a stack buffer for tanh).
constexpr int64_t kGeluBlock = 1024;

// unary_grad's GeluTanh rule on a contiguous float32 row, with Eigen's vectorised tanh: the
// tanh the forward's contiguous path (eigen_unary) uses, so forward and backward see the same
// values. std::tanh, which the scalar rule calls, costs a libm call (tanhf, then expm1f) per
// element. Float64 keeps the scalar rule: Eigen has no vectorised tanh for double.
void gelu_tanh_grad_float(float* o, const float* g, const float* x, int64_t n) {
  using Array = Eigen::Array<float, Eigen::Dynamic, 1>;
  const auto k = static_cast<float>(kSqrt2OverPi), c = static_cast<float>(kGeluCoeff);
  const auto c3 = static_cast<float>(3 * kGeluCoeff);
  float buffer[kGeluBlock];
  for (int64_t b = 0; b < n; b += kGeluBlock) {
    const int64_t len = std::min(kGeluBlock, n - b);
    Eigen::Map<const Array> s(x + b, len), gr(g + b, len);
    Eigen::Map<Array> t(buffer, len);
    t = (k * (s + c * s * s * s)).tanh();
    const auto dinner = k * (1.0f + c3 * s * s);
    Eigen::Map<Array>(o + b, len) = gr * (0.5f * (1.0f + t) + 0.5f * s * (1.0f - t * t) * dinner);
  }
}

// grad_in = unary_grad(op, grad_out, saved) over one row, all three of type T.
template <typename T>
void unary_grad_row(UnaryOp op, char* o, const char* g, const char* sv, int64_t so, int64_t sg,
                    int64_t ss, int64_t n) {
  using C = compute_t<T>;
  switch (op) {  // hoist the switch out of the loop for the ops of a training step
    case UnaryOp::Relu:
      return map2<T, T>(o, g, sv, so, sg, ss, n, [](C x, C y) { return relu_grad(x, y); });
    case UnaryOp::Tanh:
      return map2<T, T>(o, g, sv, so, sg, ss, n, [](C x, C y) { return tanh_grad(x, y); });
    case UnaryOp::Sigmoid:
      return map2<T, T>(o, g, sv, so, sg, ss, n, [](C x, C y) { return sigmoid_grad(x, y); });
    case UnaryOp::Exp:
      return map2<T, T>(o, g, sv, so, sg, ss, n, [](C x, C y) { return exp_grad(x, y); });
    case UnaryOp::GeluTanh:
      if constexpr (std::is_same_v<T, float>) {
        constexpr int64_t es = sizeof(float);
        if (so == es && sg == es && ss == es) {
          return gelu_tanh_grad_float(reinterpret_cast<float*>(o),
                                      reinterpret_cast<const float*>(g),
                                      reinterpret_cast<const float*>(sv), n);
        }
      }
      return map2<T, T>(o, g, sv, so, sg, ss, n, [op](C x, C y) { return unary_grad(op, x, y); });
    default:
      return map2<T, T>(o, g, sv, so, sg, ss, n, [op](C x, C y) { return unary_grad(op, x, y); });
  }
}

template <typename T, typename R>
void binary_row(BinaryOp op, char* o, const char* a, const char* b, int64_t so, int64_t sa,
                int64_t sb, int64_t n, double alpha) {
  using C = compute_t<T>;
  const C al = static_cast<C>(alpha);
  switch (op) {
    // alpha = 1 gets its own loop: x + 1 y folds to x + y, which vectorises best.
    case BinaryOp::Add:
      if (alpha == 1.0) {
        return map2<T, R>(o, a, b, so, sa, sb, n, [](C x, C y) { return add_value(x, y, C(1)); });
      }
      return map2<T, R>(o, a, b, so, sa, sb, n, [al](C x, C y) { return add_value(x, y, al); });
    case BinaryOp::Sub:
      if (alpha == 1.0) {
        return map2<T, R>(o, a, b, so, sa, sb, n, [](C x, C y) { return sub_value(x, y, C(1)); });
      }
      return map2<T, R>(o, a, b, so, sa, sb, n, [al](C x, C y) { return sub_value(x, y, al); });
    case BinaryOp::Mul:
      return map2<T, R>(o, a, b, so, sa, sb, n, [](C x, C y) { return mul_rn(x, y); });
    default:
      return map2<T, R>(o, a, b, so, sa, sb, n,
                        [op, al](C x, C y) { return binary_value(op, x, y, al); });
  }
}

// ---- mixed-dtype loops: convert each element through the compute type C ----

template <typename C, size_t K, typename F>
void mixed_loop(const std::array<const Operand*, K>& ops, F f) {
  const LoopNest<K> nest = LoopNest<K>::make(ops);
  std::array<DType, K> dt;
  for (size_t k = 0; k < K; ++k) dt[k] = ops[k]->dtype;
  parallel_run(nest, base_pointers(ops),
               [&](std::array<char*, K> p, std::array<int64_t, K> s, int64_t n) {
                 for (int64_t i = 0; i < n; ++i) {
                   std::array<C, K - 1> in;
                   for (size_t k = 1; k < K; ++k) in[k - 1] = load_as<C>(p[k] + i * s[k], dt[k]);
                   store_as<C>(p[0] + i * s[0], dt[0], f(in));
                 }
               });
}

bool same_dtype(std::initializer_list<const Operand*> ops) {
  const DType d = (*ops.begin())->dtype;
  for (const Operand* op : ops) {
    if (op->dtype != d) return false;
  }
  return true;
}

}  // namespace

// ---- entry points ----

void CpuBackend::unary(UnaryOp op, const Operand& out, const Operand& in) {
  const std::array<const Operand*, 2> ops = {&out, &in};
  if (same_dtype({&out, &in})) {
    const LoopNest<2> nest = LoopNest<2>::make(ops);
    dispatch_dtype(out.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        mixed_loop<double, 2>(ops, [op](auto v) { return unary_value(op, v[0]); });
      } else {
        parallel_run(nest, base_pointers(ops), [&](auto p, auto s, int64_t n) {
          unary_row<T>(op, p[0], p[1], s[0], s[1], n);
        });
      }
    });
    return;
  }
  // e.g. exp of an int64 tensor into float32: compute in the output's type.
  dispatch_floating(unary_compute_dtype(out.dtype, in.dtype), [&](auto tag) {
    using C = compute_t<decltype(tag)>;
    mixed_loop<C, 2>(ops, [op](auto v) { return unary_value(op, v[0]); });
  });
}

void CpuBackend::unary_backward(UnaryOp op, const Operand& grad_in, const Operand& grad_out,
                                const Operand& saved) {
  const std::array<const Operand*, 3> ops = {&grad_in, &grad_out, &saved};
  if (same_dtype({&grad_in, &grad_out, &saved})) {
    const LoopNest<3> nest = LoopNest<3>::make(ops);
    dispatch_floating(grad_in.dtype, [&](auto tag) {
      using T = decltype(tag);
      parallel_run(nest, base_pointers(ops), [&](auto p, auto s, int64_t n) {
        unary_grad_row<T>(op, p[0], p[1], p[2], s[0], s[1], s[2], n);
      });
    });
    return;
  }
  dispatch_floating(floating_compute_dtype(grad_in.dtype), [&](auto tag) {
    using C = compute_t<decltype(tag)>;
    mixed_loop<C, 3>(ops, [op](auto v) { return unary_grad(op, v[0], v[1]); });
  });
}

void CpuBackend::binary(BinaryOp op, const Operand& out, const Operand& a, const Operand& b,
                        double alpha) {
  const std::array<const Operand*, 3> ops = {&out, &a, &b};
  if (a.dtype == b.dtype && a.dtype != DType::Bool &&
      (out.dtype == a.dtype || (out.dtype == DType::Bool && is_comparison(op)))) {
    const LoopNest<3> nest = LoopNest<3>::make(ops);
    dispatch_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) {
        parallel_run(nest, base_pointers(ops), [&](auto p, auto s, int64_t n) {
          if (out.dtype == DType::Bool && a.dtype != DType::Bool) {
            binary_row<T, bool>(op, p[0], p[1], p[2], s[0], s[1], s[2], n, alpha);
          } else {
            binary_row<T, T>(op, p[0], p[1], p[2], s[0], s[1], s[2], n, alpha);
          }
        });
      }
    });
    return;
  }
  // Mixed dtypes: compute in the promoted input type (comparisons) or the output's type.
  dispatch_dtype(binary_compute_dtype(op, out.dtype, a.dtype, b.dtype), [&](auto tag) {
    using C = compute_t<decltype(tag)>;
    if constexpr (!std::is_same_v<C, bool>) {
      const C al = static_cast<C>(alpha);
      mixed_loop<C, 3>(ops, [op, al](auto v) { return binary_value(op, v[0], v[1], al); });
    }
  });
}

void CpuBackend::binary_scalar(BinaryOp op, const Operand& out, const Operand& a, double scalar,
                               bool scalar_first) {
  // The scalar becomes a host operand broadcast with stride 0, in the dtype
  // scalar_operand_dtype picks (a's dtype when it fits exactly, so the typed paths apply).
  union {
    float f;
    double d;
    int64_t i;
  } value{};
  Operand s;
  s.data = &value;
  s.ndim = out.ndim;
  for (int d = 0; d < out.ndim; ++d) s.sizes[d] = out.sizes[d];
  s.dtype = scalar_operand_dtype(a.dtype, scalar);
  switch (s.dtype) {
    case DType::Float32: value.f = static_cast<float>(scalar); break;
    case DType::Int64: value.i = static_cast<int64_t>(scalar); break;
    default: value.d = scalar; break;
  }
  if (scalar_first) {
    binary(op, out, s, a, 1.0);
  } else {
    binary(op, out, a, s, 1.0);
  }
}

void CpuBackend::pow_scalar_backward(const Operand& grad_in, const Operand& grad_out,
                                     const Operand& x, double exponent) {
  const std::array<const Operand*, 3> ops = {&grad_in, &grad_out, &x};
  dispatch_floating(floating_compute_dtype(grad_in.dtype), [&](auto tag) {
    using C = compute_t<decltype(tag)>;
    const C e = static_cast<C>(exponent);
    mixed_loop<C, 3>(ops, [e](auto v) { return pow_scalar_grad(v[0], v[1], e); });
  });
}

void CpuBackend::clamp(const Operand& out, const Operand& in, double min, double max, bool has_min,
                       bool has_max) {
  const std::array<const Operand*, 2> ops = {&out, &in};
  const DType c = is_floating(out.dtype) ? floating_compute_dtype(out.dtype) : DType::Float64;
  dispatch_floating(c, [&](auto tag) {
    using C = compute_t<decltype(tag)>;
    const C lo = static_cast<C>(min), hi = static_cast<C>(max);
    mixed_loop<C, 2>(ops, [=](auto v) { return clamp_value(v[0], lo, hi, has_min, has_max); });
  });
}

void CpuBackend::clamp_backward(const Operand& grad_in, const Operand& grad_out, const Operand& x,
                                double min, double max, bool has_min, bool has_max) {
  const std::array<const Operand*, 3> ops = {&grad_in, &grad_out, &x};
  dispatch_floating(floating_compute_dtype(grad_in.dtype), [&](auto tag) {
    using C = compute_t<decltype(tag)>;
    const C lo = static_cast<C>(min), hi = static_cast<C>(max);
    mixed_loop<C, 3>(ops, [=](auto v) { return clamp_grad(v[0], v[1], lo, hi, has_min, has_max); });
  });
}

void CpuBackend::where(const Operand& out, const Operand& cond, const Operand& a,
                       const Operand& b) {
  const std::array<const Operand*, 4> ops = {&out, &cond, &a, &b};
  const DType c = is_floating(out.dtype) ? compute_dtype(out.dtype) : out.dtype;
  dispatch_dtype(c, [&](auto tag) {
    using C = compute_t<decltype(tag)>;
    mixed_loop<C, 4>(ops, [](auto v) { return where_value(v[0], v[1], v[2]); });
  });
}

}  // namespace memgrad::kernels::cpu
