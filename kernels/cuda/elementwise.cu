// CUDA elementwise kernels: unary, binary, scalar, clamp, where, and the unary backward rules.
// The formulas and the compute-type rules are kernels/elementwise_formulas.h, the same text the
// CPU backend runs (and the CPU tests check); this file holds the functors and loops.
//
// Two paths per call:
//   contiguous  every operand contiguous, the inputs of one storage type T and the output T or
//               bool, computing in T's compute type: each thread handles 16 bytes of input with
//               vector loads and stores when the pointers are aligned for them;
//   strided     anything else (broadcast inputs with stride 0, transposes, mixed dtypes): one
//               element per thread and grid-stride step, offsets from the Indexer, each operand
//               loaded and stored through its run-time dtype.
// Launch: 256-thread blocks, at most 2^20 blocks, grid-stride loops; the current stream of the
// backend's device. The compute type follows the shared rules (float16 in float; comparisons of
// mixed dtypes in float64 or int64; other mixed ops in the output's compute type).
#include "kernels/cuda/cuda_backend.h"

#include "allocator/cuda_check.h"
#include "kernels/cuda/cuda_handles.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/elementwise_formulas.h"

namespace memgrad::kernels::cuda {
namespace {

// Bytes of input each thread of the contiguous path reads per step.
constexpr int kVectorBytes = 16;

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
  __device__ C operator()(const C (&v)[1]) const {
    return unary_value(op, v[0]);
  }
};

struct UnaryGradFn {  // (grad_out, saved)
  using traits = FloatingOnly;
  UnaryOp op;
  template <typename C>
  __device__ C operator()(const C (&v)[2]) const {
    return unary_grad(op, v[0], v[1]);
  }
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
    return pow_scalar_grad(v[0], v[1], static_cast<C>(exponent));
  }
};

struct ClampFn {
  using traits = FloatingOnly;
  double min, max;
  bool has_min, has_max;
  template <typename C>
  __device__ C operator()(const C (&v)[1]) const {
    return clamp_value(v[0], static_cast<C>(min), static_cast<C>(max), has_min, has_max);
  }
};

struct ClampGradFn {  // (grad_out, x)
  using traits = FloatingOnly;
  double min, max;
  bool has_min, has_max;
  template <typename C>
  __device__ C operator()(const C (&v)[2]) const {
    return clamp_grad(v[0], v[1], static_cast<C>(min), static_cast<C>(max), has_min, has_max);
  }
};

struct WhereFn {  // (cond, a, b)
  using traits = AnyCompute;
  template <typename C>
  __device__ C operator()(const C (&v)[3]) const {
    return where_value(v[0], v[1], v[2]);
  }
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

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// The contiguous path when every operand is contiguous, else the strided one. Inputs have
// storage type T, the output R; computes in C.
template <int N, typename T, typename R, typename C, typename F>
void launch_map(int device, const char* name, const std::array<const Operand*, N + 1>& ops, F f) {
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
  contiguous_kernel<N, T, R, C>
      <<<grid_for((n + V - 1) / V), kBlockThreads, 0, current_cuda_stream(device)>>>(
          static_cast<R*>(ops[0]->data), in, n, vectorized, f);
  check_launch(name, ops);
}

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
void run(int device, const char* name, const std::array<const Operand*, N + 1>& ops, DType c, F f) {
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

}  // namespace

// ---- entry points ----

void CudaBackend::unary(UnaryOp op, const Operand& out, const Operand& in) {
  DeviceGuard guard(device_);
  run<1>(device_, "unary_kernel", {&out, &in}, unary_compute_dtype(out.dtype, in.dtype),
         UnaryFn{op});
}

void CudaBackend::unary_backward(UnaryOp op, const Operand& grad_in, const Operand& grad_out,
                                 const Operand& saved) {
  DeviceGuard guard(device_);
  run<2>(device_, "unary_backward_kernel", {&grad_in, &grad_out, &saved},
         floating_compute_dtype(grad_in.dtype), UnaryGradFn{op});
}

void CudaBackend::binary(BinaryOp op, const Operand& out, const Operand& a, const Operand& b,
                         double alpha) {
  DeviceGuard guard(device_);
  run<2>(device_, "binary_kernel", {&out, &a, &b},
         binary_compute_dtype(op, out.dtype, a.dtype, b.dtype), BinaryFn{op, alpha});
}

void CudaBackend::binary_scalar(BinaryOp op, const Operand& out, const Operand& a, double scalar,
                                bool scalar_first) {
  // The CPU stores the scalar as a broadcast operand of dtype scalar_operand_dtype. The same
  // rounding and the same compute dtype here, with the scalar passed by value.
  DeviceGuard guard(device_);
  const DType s = scalar_operand_dtype(a.dtype, scalar);
  double value = scalar;
  if (s == DType::Float32) value = static_cast<double>(static_cast<float>(scalar));
  if (s == DType::Int64) value = static_cast<double>(static_cast<int64_t>(scalar));
  const DType c = scalar_first ? binary_compute_dtype(op, out.dtype, s, a.dtype)
                               : binary_compute_dtype(op, out.dtype, a.dtype, s);
  run<1>(device_, "binary_scalar_kernel", {&out, &a}, c, ScalarFn{op, value, scalar_first});
}

void CudaBackend::pow_scalar_backward(const Operand& grad_in, const Operand& grad_out,
                                      const Operand& x, double exponent) {
  DeviceGuard guard(device_);
  run<2>(device_, "pow_scalar_backward_kernel", {&grad_in, &grad_out, &x},
         floating_compute_dtype(grad_in.dtype), PowGradFn{exponent});
}

void CudaBackend::clamp(const Operand& out, const Operand& in, double min, double max, bool has_min,
                        bool has_max) {
  DeviceGuard guard(device_);
  const DType c = is_floating(out.dtype) ? floating_compute_dtype(out.dtype) : DType::Float64;
  run<1>(device_, "clamp_kernel", {&out, &in}, c, ClampFn{min, max, has_min, has_max});
}

void CudaBackend::clamp_backward(const Operand& grad_in, const Operand& grad_out, const Operand& x,
                                 double min, double max, bool has_min, bool has_max) {
  DeviceGuard guard(device_);
  run<2>(device_, "clamp_backward_kernel", {&grad_in, &grad_out, &x},
         floating_compute_dtype(grad_in.dtype), ClampGradFn{min, max, has_min, has_max});
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
