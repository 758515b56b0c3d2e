// CUDA elementwise kernels: unary, binary, scalar, clamp, where, and the unary backward rules,
// computing exactly what kernels/cpu/elementwise.cpp computes (same compute type per case).
//
// Two paths per call:
//   contiguous  every operand contiguous, the inputs of one storage type T and the output T or
//               bool, computing in T's compute type: each thread handles 16 bytes of input with
//               vector loads and stores when the pointers are aligned for them;
//   strided     anything else (broadcast inputs with stride 0, transposes, mixed dtypes): one
//               element per thread and grid-stride step, offsets from the Indexer, each operand
//               loaded and stored through its run-time dtype.
// Launch: 256-thread blocks, at most 2^20 blocks, grid-stride loops; the current stream of the
// backend's device. The compute type follows the CPU's rules (float16 in float; comparisons of
// mixed dtypes in float64 or int64; other mixed ops in the output's compute type), and products
// that the CPU rounds separately (a + alpha b) use the _rn intrinsics so nvcc does not fuse them.
#include "kernels/cuda/cuda_backend.h"

#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_handles.h"
#include "kernels/cuda/launch.cuh"

namespace memgrad::kernels::cuda {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCoeff = 0.044715;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;
// Bytes of input each thread of the contiguous path reads per step.
constexpr int kVectorBytes = 16;

// ---- kernels section: formulas ----

// Float overloads for float, the double functions for everything else (integer compute types
// reach these only through unary_value's cast to double).
template <typename C>
__device__ __forceinline__ C sqrt_of(C x) {
  if constexpr (std::is_same_v<C, float>) return sqrtf(x);
  else return static_cast<C>(sqrt(static_cast<double>(x)));
}

template <typename C>
__device__ __forceinline__ C tanh_of(C x) {
  if constexpr (std::is_same_v<C, float>) return tanhf(x);
  else return static_cast<C>(tanh(static_cast<double>(x)));
}

template <typename C>
__device__ __forceinline__ C erf_of(C x) {
  if constexpr (std::is_same_v<C, float>) return erff(x);
  else return static_cast<C>(erf(static_cast<double>(x)));
}

template <typename C>
__device__ __forceinline__ C pow_of(C x, C y) {
  if constexpr (std::is_same_v<C, float>) return powf(x, y);
  else return static_cast<C>(pow(static_cast<double>(x), static_cast<double>(y)));
}

template <typename C>
__device__ __forceinline__ C sigmoid_of(C x) {
  return C(1) / (C(1) + exp_of(-x));
}

template <typename C>
__device__ C unary_value(UnaryOp op, C x) {
  if constexpr (std::is_floating_point_v<C>) {
    switch (op) {
      case UnaryOp::Neg: return -x;
      case UnaryOp::Exp: return exp_of(x);
      case UnaryOp::Log: return log_of(x);
      case UnaryOp::Sqrt: return sqrt_of(x);
      case UnaryOp::Rsqrt: return C(1) / sqrt_of(x);
      case UnaryOp::Abs: return x < C(0) ? -x : (x == C(0) ? C(0) : x);
      case UnaryOp::Sign: return C((x > C(0)) - (x < C(0)));
      case UnaryOp::Tanh: return tanh_of(x);
      case UnaryOp::Sigmoid: return sigmoid_of(x);
      case UnaryOp::Relu: return x < C(0) ? C(0) : x;  // NaN passes through, as in PyTorch
      case UnaryOp::GeluTanh:
        return C(0.5) * x * (C(1) + tanh_of(C(kSqrt2OverPi) * (x + C(kGeluCoeff) * x * x * x)));
      case UnaryOp::GeluErf: return C(0.5) * x * (C(1) + erf_of(x * C(kInvSqrt2)));
      case UnaryOp::Silu: return x * sigmoid_of(x);
      case UnaryOp::Reciprocal: return C(1) / x;
      case UnaryOp::Square: return mul_rn(x, x);
      case UnaryOp::LogicalNot: return C(x == C(0));
    }
  } else {
    switch (op) {
      case UnaryOp::Neg: return static_cast<C>(-x);
      case UnaryOp::Abs: return x < C(0) ? static_cast<C>(-x) : x;
      case UnaryOp::Sign: return static_cast<C>((x > C(0)) - (x < C(0)));
      case UnaryOp::Relu: return x < C(0) ? C(0) : x;
      case UnaryOp::Square: return static_cast<C>(x * x);
      case UnaryOp::LogicalNot: return static_cast<C>(x == C(0));
      default: return static_cast<C>(unary_value<double>(op, static_cast<double>(x)));
    }
  }
  return x;
}

// d/dx of op at the saved value (the output for output-saving ops), times g.
template <typename C>
__device__ C unary_grad(UnaryOp op, C g, C s) {
  switch (op) {
    case UnaryOp::Neg: return -g;
    case UnaryOp::Exp: return mul_rn(g, s);                       // s = exp(x)
    case UnaryOp::Log: return g / s;                              // s = x
    case UnaryOp::Sqrt: return g / mul_rn(C(2), s);               // s = sqrt(x)
    case UnaryOp::Rsqrt: return C(-0.5) * g * s * s * s;          // s = x^-1/2
    case UnaryOp::Abs: return g * C((s > C(0)) - (s < C(0)));
    case UnaryOp::Sign: return C(0);
    case UnaryOp::Tanh: return mul_rn(g, add_rn(C(1), -mul_rn(s, s)));   // s = tanh(x)
    case UnaryOp::Sigmoid: return mul_rn(mul_rn(g, s), add_rn(C(1), -s));  // s = sigmoid(x)
    case UnaryOp::Relu: return s > C(0) ? g : C(0);               // s = relu(x)
    case UnaryOp::GeluTanh: {                                     // s = x
      const C inner = C(kSqrt2OverPi) * (s + C(kGeluCoeff) * s * s * s);
      const C t = tanh_of(inner);
      const C dinner = C(kSqrt2OverPi) * (C(1) + C(3 * kGeluCoeff) * s * s);
      return g * (C(0.5) * (C(1) + t) + C(0.5) * s * (C(1) - t * t) * dinner);
    }
    case UnaryOp::GeluErf: {                                      // s = x
      const C cdf = C(0.5) * (C(1) + erf_of(s * C(kInvSqrt2)));
      const C pdf = exp_of(C(-0.5) * s * s) * C(kInvSqrt2Pi);
      return g * (cdf + s * pdf);
    }
    case UnaryOp::Silu: {                                         // s = x
      const C sig = sigmoid_of(s);
      return g * sig * (C(1) + s * (C(1) - sig));
    }
    case UnaryOp::Reciprocal: return -mul_rn(mul_rn(g, s), s);    // s = 1/x
    case UnaryOp::Square: return mul_rn(mul_rn(C(2), g), s);      // s = x
    case UnaryOp::LogicalNot: return C(0);
  }
  return C(0);
}

template <typename C>
__device__ C binary_value(BinaryOp op, C a, C b, C alpha) {
  switch (op) {
    case BinaryOp::Add: return add_rn(a, mul_rn(alpha, b));
    case BinaryOp::Sub: return add_rn(a, static_cast<C>(-mul_rn(alpha, b)));
    case BinaryOp::Mul: return mul_rn(a, b);
    case BinaryOp::Div:
      if constexpr (std::is_integral_v<C>) return b == 0 ? C(0) : static_cast<C>(a / b);
      else return a / b;
    case BinaryOp::Pow: return pow_of(a, b);
    case BinaryOp::Maximum:
      if (is_nan(a) || is_nan(b)) return static_cast<C>(a + b);  // NaN propagates
      return a > b ? a : b;
    case BinaryOp::Minimum:
      if (is_nan(a) || is_nan(b)) return static_cast<C>(a + b);
      return a < b ? a : b;
    case BinaryOp::Eq: return C(a == b);
    case BinaryOp::Ne: return C(a != b);
    case BinaryOp::Lt: return C(a < b);
    case BinaryOp::Le: return C(a <= b);
    case BinaryOp::Gt: return C(a > b);
    case BinaryOp::Ge: return C(a >= b);
    case BinaryOp::LogicalAnd: return C(a != C(0) && b != C(0));
    case BinaryOp::LogicalOr: return C(a != C(0) || b != C(0));
  }
  return C(0);
}

// ---- kernels section: functors (one per op family; C is the compute type) ----

// Which compute types a functor is instantiated for (the CPU's dispatch for that family).
struct FloatingOnly {
  template <typename C>
  static constexpr bool supports() {
    return std::is_same_v<C, float> || std::is_same_v<C, double>;
  }
};
struct Arithmetic {
  template <typename C>
  static constexpr bool supports() {
    return FloatingOnly::supports<C>() || std::is_same_v<C, int64_t>;
  }
};
struct AnyCompute {
  template <typename C>
  static constexpr bool supports() {
    return true;
  }
};

struct UnaryFn {
  using traits = Arithmetic;
  UnaryOp op;
  template <typename C>
  __device__ C operator()(const C (&v)[1]) const { return unary_value(op, v[0]); }
};

struct UnaryGradFn {  // (grad_out, saved)
  using traits = FloatingOnly;
  UnaryOp op;
  template <typename C>
  __device__ C operator()(const C (&v)[2]) const { return unary_grad(op, v[0], v[1]); }
};

struct BinaryFn {
  using traits = Arithmetic;
  BinaryOp op;
  double alpha;
  template <typename C>
  __device__ C operator()(const C (&v)[2]) const {
    return binary_value(op, v[0], v[1], static_cast<C>(alpha));
  }
};

struct ScalarFn {  // `scalar` is already rounded as the CPU stores it
  using traits = Arithmetic;
  BinaryOp op;
  double scalar;
  bool scalar_first;
  template <typename C>
  __device__ C operator()(const C (&v)[1]) const {
    const C s = static_cast<C>(scalar);
    return scalar_first ? binary_value(op, s, v[0], C(1)) : binary_value(op, v[0], s, C(1));
  }
};

struct PowGradFn {  // (grad_out, x)
  using traits = FloatingOnly;
  double exponent;
  template <typename C>
  __device__ C operator()(const C (&v)[2]) const {
    const C e = static_cast<C>(exponent);
    return e == C(0) ? C(0) : mul_rn(mul_rn(v[0], e), pow_of(v[1], static_cast<C>(e - C(1))));
  }
};

struct ClampFn {
  using traits = FloatingOnly;
  double min, max;
  bool has_min, has_max;
  template <typename C>
  __device__ C operator()(const C (&v)[1]) const {
    C x = v[0];
    if (is_nan(x)) return x;  // NaN stays NaN
    if (has_min && x < static_cast<C>(min)) x = static_cast<C>(min);
    if (has_max && x > static_cast<C>(max)) x = static_cast<C>(max);
    return x;
  }
};

struct ClampGradFn {  // (grad_out, x)
  using traits = FloatingOnly;
  double min, max;
  bool has_min, has_max;
  template <typename C>
  __device__ C operator()(const C (&v)[2]) const {
    const bool inside = (!has_min || v[1] >= static_cast<C>(min)) &&
                        (!has_max || v[1] <= static_cast<C>(max));
    return inside ? v[0] : C(0);
  }
};

struct WhereFn {  // (cond, a, b)
  using traits = AnyCompute;
  template <typename C>
  __device__ C operator()(const C (&v)[3]) const { return v[0] != C(0) ? v[1] : v[2]; }
};

// ---- kernels section: loops ----

template <int K>
struct Ptrs {
  char* p[K];
  DType dtype[K];
};

template <typename T, int N>
struct InPtrs {
  const T* p[N];
};

template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// out = f(in...) for operands of any layout and dtype; operand 0 is the output.
template <int N, typename C, typename F>
__global__ void strided_kernel(Indexer<N + 1> ix, Ptrs<N + 1> ptrs, int64_t n, F f) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    int64_t off[N + 1];
    ix.offsets(i, off);
    C in[N];
#pragma unroll
    for (int k = 0; k < N; ++k) in[k] = load_as<C>(ptrs.p[k + 1] + off[k + 1], ptrs.dtype[k + 1]);
    store_as<C>(ptrs.p[0] + off[0], ptrs.dtype[0], f(in));
  }
}

// out = f(in...) for contiguous operands: inputs T, output R, V elements per thread and step.
template <int N, typename T, typename R, typename C, typename F>
__global__ void contiguous_kernel(R* out, InPtrs<T, N> in, int64_t n, bool vectorized, F f) {
  constexpr int V = kVectorBytes / sizeof(T) > 0 ? kVectorBytes / sizeof(T) : 1;
  for (int64_t base = thread_index() * V; base < n; base += grid_stride() * V) {
    if (vectorized && base + V <= n) {
      Vec<T, V> loaded[N];
#pragma unroll
      for (int k = 0; k < N; ++k) loaded[k] = *reinterpret_cast<const Vec<T, V>*>(in.p[k] + base);
      Vec<R, V> result;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        C x[N];
#pragma unroll
        for (int k = 0; k < N; ++k) x[k] = to_compute<C>(loaded[k].v[j]);
        result.v[j] = from_compute<R>(f(x));
      }
      *reinterpret_cast<Vec<R, V>*>(out + base) = result;
    } else {
      for (int64_t i = base; i < n && i < base + V; ++i) {
        C x[N];
#pragma unroll
        for (int k = 0; k < N; ++k) x[k] = to_compute<C>(in.p[k][i]);
        out[i] = from_compute<R>(f(x));
      }
    }
  }
}

// ---- launchers section ----

template <int N, typename C, typename F>
void launch_strided(int device, const char* name, const std::array<const Operand*, N + 1>& ops,
                    F f) {
  const int64_t n = ops[0]->numel();
  if (n == 0) return;
  Ptrs<N + 1> ptrs{};
  for (int k = 0; k <= N; ++k) {
    ptrs.p[k] = static_cast<char*>(ops[k]->data);
    ptrs.dtype[k] = ops[k]->dtype;
  }
  strided_kernel<N, C><<<grid_for(n), kBlockThreads, 0, current_cuda_stream(device)>>>(
      make_indexer<N + 1>(ops), ptrs, n, f);
  check_launch(name, ops);
}

bool aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// The contiguous path when every operand is contiguous, else the strided one. Inputs have
// storage type T, the output R; computes in C.
template <int N, typename T, typename R, typename C, typename F>
void launch_map(int device, const char* name, const std::array<const Operand*, N + 1>& ops,
                F f) {
  const int64_t n = ops[0]->numel();
  if (n == 0) return;
  if (!all_contiguous<N + 1>(make_indexer<N + 1>(ops), ops)) {
    launch_strided<N, C>(device, name, ops, f);
    return;
  }
  constexpr int V = kVectorBytes / sizeof(T) > 0 ? kVectorBytes / sizeof(T) : 1;
  InPtrs<T, N> in{};
  bool vectorized = aligned(ops[0]->data, sizeof(R) * V);
  for (int k = 0; k < N; ++k) {
    in.p[k] = static_cast<const T*>(ops[k + 1]->data);
    vectorized = vectorized && aligned(in.p[k], sizeof(T) * V);
  }
  contiguous_kernel<N, T, R, C><<<grid_for((n + V - 1) / V), kBlockThreads, 0,
                                  current_cuda_stream(device)>>>(static_cast<R*>(ops[0]->data),
                                                                 in, n, vectorized, f);
  check_launch(name, ops);
}

DType compute_dtype(DType d) { return d == DType::Float16 ? DType::Float32 : d; }

// Calls fn(Tag<C>{}) for the compute dtype c (float32, float64, int64 or bool).
template <typename Fn>
void dispatch_compute(DType c, Fn&& fn) {
  switch (c) {
    case DType::Float64: fn(Tag<double>{}); return;
    case DType::Int64: fn(Tag<int64_t>{}); return;
    case DType::Bool: fn(Tag<bool>{}); return;
    default: fn(Tag<float>{}); return;
  }
}

// Runs f over ops computing in dtype c: the contiguous path when the inputs share a storage
// dtype T (not bool) whose compute dtype is c and the output is T or bool, else strided.
template <int N, typename F>
void run(int device, const char* name, const std::array<const Operand*, N + 1>& ops, DType c,
         F f) {
  const DType t = ops[1]->dtype;
  bool uniform = t != DType::Bool && compute_dtype(t) == c &&
                 (ops[0]->dtype == t || ops[0]->dtype == DType::Bool);
  for (int k = 2; k <= N; ++k) uniform = uniform && ops[k]->dtype == t;
  if (uniform) {
    dispatch_storage(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      if constexpr (!std::is_same_v<T, bool> && F::traits::template supports<C>()) {
        if (ops[0]->dtype == DType::Bool) {
          launch_map<N, T, bool, C>(device, name, ops, f);
        } else {
          launch_map<N, T, T, C>(device, name, ops, f);
        }
      }
    });
    return;
  }
  dispatch_compute(c, [&](auto tag) {
    using C = typename decltype(tag)::type;
    if constexpr (F::traits::template supports<C>()) launch_strided<N, C>(device, name, ops, f);
  });
}

// float64 stays, everything else computes in float (the CPU's dispatch_floating).
DType floating_compute(DType d) { return d == DType::Float64 ? DType::Float64 : DType::Float32; }

// The CPU's rule for a binary op's compute dtype (kernels/cpu/elementwise.cpp).
DType binary_compute(BinaryOp op, DType out, DType a, DType b) {
  if (a == b && a != DType::Bool && (out == a || (out == DType::Bool && is_comparison(op)))) {
    return compute_dtype(a);
  }
  DType c = is_comparison(op)
                ? (is_floating(a) || is_floating(b) ? DType::Float64 : DType::Int64)
                : compute_dtype(out);
  return c == DType::Bool ? DType::Int64 : c;
}

}  // namespace

// ---- entry points ----

void CudaBackend::unary(UnaryOp op, const Operand& out, const Operand& in) {
  DeviceGuard guard(device_);
  DType c = DType::Float64;  // bool, and non-floating outputs of mixed calls, compute in double
  if (out.dtype == in.dtype && out.dtype != DType::Bool) {
    c = compute_dtype(out.dtype);
  } else if (is_floating(out.dtype)) {
    c = compute_dtype(out.dtype);
  }
  run<1>(device_, "unary_kernel", {&out, &in}, c, UnaryFn{op});
}

void CudaBackend::unary_backward(UnaryOp op, const Operand& grad_in, const Operand& grad_out,
                                 const Operand& saved) {
  DeviceGuard guard(device_);
  run<2>(device_, "unary_backward_kernel", {&grad_in, &grad_out, &saved},
         floating_compute(grad_in.dtype), UnaryGradFn{op});
}

void CudaBackend::binary(BinaryOp op, const Operand& out, const Operand& a, const Operand& b,
                         double alpha) {
  DeviceGuard guard(device_);
  run<2>(device_, "binary_kernel", {&out, &a, &b}, binary_compute(op, out.dtype, a.dtype, b.dtype),
         BinaryFn{op, alpha});
}

void CudaBackend::binary_scalar(BinaryOp op, const Operand& out, const Operand& a, double scalar,
                                bool scalar_first) {
  // The CPU stores the scalar as a broadcast operand: float for float32/16 tensors, int64 when
  // it is integral and fits (non-float64 tensors), float64 otherwise. The same rounding and the
  // same compute dtype here, with the scalar passed by value.
  DeviceGuard guard(device_);
  DType s = DType::Float64;
  double value = scalar;
  if (a.dtype == DType::Float32 || a.dtype == DType::Float16) {
    s = DType::Float32;
    value = static_cast<double>(static_cast<float>(scalar));
  } else if (a.dtype != DType::Float64 && scalar == std::trunc(scalar) && std::abs(scalar) < 9e18) {
    s = DType::Int64;
    value = static_cast<double>(static_cast<int64_t>(scalar));
  }
  const DType c = scalar_first ? binary_compute(op, out.dtype, s, a.dtype)
                               : binary_compute(op, out.dtype, a.dtype, s);
  run<1>(device_, "binary_scalar_kernel", {&out, &a}, c, ScalarFn{op, value, scalar_first});
}

void CudaBackend::pow_scalar_backward(const Operand& grad_in, const Operand& grad_out,
                                      const Operand& x, double exponent) {
  DeviceGuard guard(device_);
  run<2>(device_, "pow_scalar_backward_kernel", {&grad_in, &grad_out, &x},
         floating_compute(grad_in.dtype), PowGradFn{exponent});
}

void CudaBackend::clamp(const Operand& out, const Operand& in, double min, double max,
                        bool has_min, bool has_max) {
  DeviceGuard guard(device_);
  const DType c = is_floating(out.dtype) ? floating_compute(out.dtype) : DType::Float64;
  run<1>(device_, "clamp_kernel", {&out, &in}, c, ClampFn{min, max, has_min, has_max});
}

void CudaBackend::clamp_backward(const Operand& grad_in, const Operand& grad_out,
                                 const Operand& x, double min, double max, bool has_min,
                                 bool has_max) {
  DeviceGuard guard(device_);
  run<2>(device_, "clamp_backward_kernel", {&grad_in, &grad_out, &x},
         floating_compute(grad_in.dtype), ClampGradFn{min, max, has_min, has_max});
}

void CudaBackend::where(const Operand& out, const Operand& cond, const Operand& a,
                        const Operand& b) {
  DeviceGuard guard(device_);
  const DType c = is_floating(out.dtype) ? compute_dtype(out.dtype) : out.dtype;
  const std::array<const Operand*, 4> ops = {&out, &cond, &a, &b};
  dispatch_compute(c, [&](auto tag) {
    using C = typename decltype(tag)::type;
    launch_strided<3, C>(device_, "where_kernel", ops, WhereFn{});
  });
}

}  // namespace memgrad::kernels::cuda
