// CUDA reduction kernels: sum, mean, prod, max, min, any, all, var/std, max/min with indices,
// logsumexp and norms, over any set of dims of any strided input.
//
// The host splits the input into kept dims (the outputs) and reduced dims (ReduceGeometry, the
// CPU's ReducePlan: dims merged where contiguous, reduced dims largest stride first). Each output
// is folded by a group of G threads (G is a template parameter):
//   G = 1    one thread per output, when the innermost kept dim is contiguous and the reduced
//            dims are outer (bias gradients, (B, C) -> (C)): neighbouring threads read
//            neighbouring columns, so the loads coalesce; also for many tiny rows;
//   G = 32   one warp per output (8 per 256-thread block), for rows of moderate length;
//   G = 256  one block per output, for long rows or few outputs.
// Each thread folds elements lane, lane + G, ... of its output in order, then group_reduce
// combines the G partials with a fixed tree: results are deterministic run to run. Accumulation
// follows the CPU: floating sums, products, var, logsumexp and norms in double; integer and bool
// sums in int64; max/min in the compute type (float for float16) with NaN propagating; arg
// max/min keep the first index among ties (the first NaN wins). Grid-stride over outputs, on the
// current stream. Limit: one output is folded by at most one block, so a full reduction of a
// very large tensor runs on one multiprocessor. The folds' identities and combines, norm terms
// and var's arithmetic are kernels/reduce_formulas.h, the text the CPU backend runs too.
#include "kernels/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "allocator/cuda_check.h"
#include "kernels/cuda/cuda_handles.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/reduce_formulas.h"

namespace memgrad::kernels::cuda {
namespace {

// The split of a reduction's input into kept dims (one output each) and reduced dims. Strides
// in elements; out2 is arg_reduce's values operand (data may be null).
struct ReduceGeometry {
  int kept_ndim = 0;
  int64_t kept_sizes[kMaxDims] = {};
  int64_t kept_in[kMaxDims] = {};
  int64_t kept_out[kMaxDims] = {};
  int64_t kept_out2[kMaxDims] = {};
  int red_ndim = 0;
  int64_t red_sizes[kMaxDims] = {};
  int64_t red_strides[kMaxDims] = {};
  int64_t num_outputs = 1;
  int64_t reduce_numel = 1;
  const char* in = nullptr;
  char* out = nullptr;
  char* out2 = nullptr;
  DType in_dtype = DType::Float32, out_dtype = DType::Float32, out2_dtype = DType::Float32;
  int64_t in_es = 4, out_es = 4, out2_es = 4;

  // Element offsets of output j in the input, the output and out2.
  __device__ void kept_offsets(int64_t j, int64_t& in_off, int64_t& out_off,
                               int64_t& out2_off) const {
    in_off = out_off = out2_off = 0;
    for (int d = kept_ndim - 1; d >= 0 && j > 0; --d) {
      const int64_t c = j % kept_sizes[d];
      j /= kept_sizes[d];
      in_off += c * kept_in[d];
      out_off += c * kept_out[d];
      out2_off += c * kept_out2[d];
    }
  }
  // Element offset of the k-th reduced element (row-major over the reduced dims).
  __device__ int64_t red_offset(int64_t k) const {
    if (red_ndim == 1) return k * red_strides[0];
    int64_t off = 0;
    for (int d = red_ndim - 1; d >= 0 && k > 0; --d) {
      off += (k % red_sizes[d]) * red_strides[d];
      k /= red_sizes[d];
    }
    return off;
  }
};

// ---- kernels section: accumulators (init, element, combine) ----

template <Fold F, typename A>
struct FoldAcc {
  __device__ A init() const { return fold_identity<F, A>(); }
  __device__ A element(const char* p, DType dtype, int64_t) const {
    if constexpr (F == Fold::Any || F == Fold::All)
      return load_as<double>(p, dtype) != 0.0;
    else
      return load_as<A>(p, dtype);
  }
  __device__ A combine(A a, A b) const { return fold_combine<F>(a, b); }
};

// Sum of (x - mean)^2 (var's second pass), or of exp(x - shift) (logsumexp's), in double.
struct SquaredDeviationAcc {
  double mean;
  __device__ double init() const { return 0.0; }
  __device__ double element(const char* p, DType dtype, int64_t) const {
    return squared_deviation(load_as<double>(p, dtype), mean);
  }
  __device__ double combine(double a, double b) const { return a + b; }
};

struct ExpSumAcc {
  double shift;
  __device__ double init() const { return 0.0; }
  __device__ double element(const char* p, DType dtype, int64_t) const {
    return exp(load_as<double>(p, dtype) - shift);
  }
  __device__ double combine(double a, double b) const { return a + b; }
};

// sum |x|^p (count of non-zeros for p = 0, max/min |x| for +-inf), in double.
struct NormAcc {
  NormKind kind;
  double p;
  __device__ double init() const { return norm_identity(kind); }
  __device__ double element(const char* ptr, DType dtype, int64_t) const {
    return norm_term(kind, p, load_as<double>(ptr, dtype));
  }
  __device__ double combine(double a, double b) const { return norm_combine(kind, a, b); }
};

// The best element so far and its index along the reduced dim (kNone: no element yet).
template <typename C>
struct ArgBest {
  C value;
  int64_t index;
};
constexpr int64_t kNone = std::numeric_limits<int64_t>::max();

// max/min with the first index among ties; the first NaN beats everything. The combine is
// symmetric, so the tree's order cannot change which index wins.
template <typename C>
struct ArgAcc {
  bool is_max;
  __device__ ArgBest<C> init() const { return {C(0), kNone}; }
  __device__ ArgBest<C> element(const char* p, DType dtype, int64_t k) const {
    return {load_as<C>(p, dtype), k};
  }
  __device__ ArgBest<C> combine(ArgBest<C> a, ArgBest<C> b) const {
    if (a.index == kNone) return b;
    if (b.index == kNone) return a;
    const bool a_nan = is_nan(a.value), b_nan = is_nan(b.value);
    if (a_nan || b_nan) {
      if (a_nan && b_nan) return a.index < b.index ? a : b;
      return a_nan ? a : b;
    }
    if (is_max ? b.value > a.value : b.value < a.value) return b;
    if (a.value == b.value && b.index < a.index) return b;
    return a;
  }
};

// Folds output j's reduced elements with `acc` across the G threads of its group.
template <int G, typename Acc>
__device__ auto fold(const ReduceGeometry& g, const char* base, int lane, const Acc& acc) {
  auto value = acc.init();
  for (int64_t k = lane; k < g.reduce_numel; k += G) {
    value = acc.combine(value, acc.element(base + g.red_offset(k) * g.in_es, g.in_dtype, k));
  }
  using A = decltype(value);
  return group_reduce<G>(value, [&](A a, A b) { return acc.combine(a, b); });
}

// ---- kernels section: one output per group ----

template <Fold F, typename A>
struct FoldOp {
  bool mean;  // Sum only: divide by reduce_numel
  template <int G>
  __device__ void output(const ReduceGeometry& g, int64_t j, int lane) const {
    int64_t in_off, out_off, out2_off;
    g.kept_offsets(j, in_off, out_off, out2_off);
    const A v = fold<G>(g, g.in + in_off * g.in_es, lane, FoldAcc<F, A>{});
    if (lane != 0) return;
    char* out = g.out + out_off * g.out_es;
    if (mean) {
      store_as<double>(out, g.out_dtype,
                       static_cast<double>(v) / static_cast<double>(g.reduce_numel));
    } else {
      store_as<A>(out, g.out_dtype, v);
    }
  }
};

struct VarOp {
  double divisor;
  bool take_sqrt;
  template <int G>
  __device__ void output(const ReduceGeometry& g, int64_t j, int lane) const {
    int64_t in_off, out_off, out2_off;
    g.kept_offsets(j, in_off, out_off, out2_off);
    const char* base = g.in + in_off * g.in_es;
    const double sum = fold<G>(g, base, lane, FoldAcc<Fold::Sum, double>{});
    const double mean = sum / static_cast<double>(g.reduce_numel);
    const double ss = fold<G>(g, base, lane, SquaredDeviationAcc{mean});
    if (lane == 0) {
      store_as<double>(g.out + out_off * g.out_es, g.out_dtype, var_finish(ss, divisor, take_sqrt));
    }
  }
};

struct LogSumExpOp {
  template <int G>
  __device__ void output(const ReduceGeometry& g, int64_t j, int lane) const {
    int64_t in_off, out_off, out2_off;
    g.kept_offsets(j, in_off, out_off, out2_off);
    const char* base = g.in + in_off * g.in_es;
    double result = fold<G>(g, base, lane, FoldAcc<Fold::Max, double>{});
    // All -inf (or empty) gives -inf, a +inf gives +inf, a NaN gives NaN: no shift to apply.
    if (std::isfinite(result)) {
      result += std::log(fold<G>(g, base, lane, ExpSumAcc{result}));
    }
    if (lane == 0) store_as<double>(g.out + out_off * g.out_es, g.out_dtype, result);
  }
};

struct NormOp {
  NormAcc acc;
  template <int G>
  __device__ void output(const ReduceGeometry& g, int64_t j, int lane) const {
    int64_t in_off, out_off, out2_off;
    g.kept_offsets(j, in_off, out_off, out2_off);
    const double v = norm_finish(acc.kind, acc.p, fold<G>(g, g.in + in_off * g.in_es, lane, acc));
    if (lane == 0) store_as<double>(g.out + out_off * g.out_es, g.out_dtype, v);
  }
};

template <typename C>
struct ArgOp {
  bool is_max;
  template <int G>
  __device__ void output(const ReduceGeometry& g, int64_t j, int lane) const {
    int64_t in_off, out_off, out2_off;
    g.kept_offsets(j, in_off, out_off, out2_off);
    const ArgBest<C> best = fold<G>(g, g.in + in_off * g.in_es, lane, ArgAcc<C>{is_max});
    if (lane != 0) return;
    store_as<int64_t>(g.out + out_off * g.out_es, g.out_dtype, best.index);
    if (g.out2 != nullptr) store_as<C>(g.out2 + out2_off * g.out2_es, g.out2_dtype, best.value);
  }
};

// Groups of G threads take outputs j, j + (groups in the grid), ...; every thread of a group has
// the same j, so the group's shuffles and barriers see all of it.
template <int G, typename Op>
__global__ void reduce_kernel(ReduceGeometry g, Op op) {
  const int lane = static_cast<int>(threadIdx.x) % G;
  const int64_t per_block = blockDim.x / G;
  for (int64_t j = blockIdx.x * per_block + threadIdx.x / G; j < g.num_outputs;
       j += static_cast<int64_t>(gridDim.x) * per_block) {
    op.template output<G>(g, j, lane);
  }
}

// ---- launchers section ----

// Appends a dim of `size` to the kept dims (strides of in, out, out2), merging it into the last
// one when contiguous with it in all three.
void append_kept(ReduceGeometry& g, int64_t size, int64_t s_in, int64_t s_out, int64_t s_out2) {
  if (size == 1) return;
  const int n = g.kept_ndim;
  if (n > 0 && g.kept_in[n - 1] == s_in * size && g.kept_out[n - 1] == s_out * size &&
      g.kept_out2[n - 1] == s_out2 * size) {
    g.kept_sizes[n - 1] *= size;
    g.kept_in[n - 1] = s_in;
    g.kept_out[n - 1] = s_out;
    g.kept_out2[n - 1] = s_out2;
    return;
  }
  g.kept_sizes[n] = size;
  g.kept_in[n] = s_in;
  g.kept_out[n] = s_out;
  g.kept_out2[n] = s_out2;
  g.kept_ndim = n + 1;
}

// A dim is reduced where `out` has size 1 and `in` does not (the backend's convention).
ReduceGeometry make_geometry(const Operand& out, const Operand& in, const Operand* out2) {
  ReduceGeometry g;
  g.in = static_cast<const char*>(in.data);
  g.out = static_cast<char*>(out.data);
  g.in_dtype = in.dtype;
  g.out_dtype = out.dtype;
  g.in_es = static_cast<int64_t>(element_size(in.dtype));
  g.out_es = static_cast<int64_t>(element_size(out.dtype));
  if (out2 != nullptr) {
    g.out2 = static_cast<char*>(out2->data);
    g.out2_dtype = out2->dtype;
    g.out2_es = static_cast<int64_t>(element_size(out2->dtype));
  }
  int reduced[kMaxDims];
  int num_reduced = 0;
  for (int d = 0; d < in.ndim; ++d) {
    if (out.sizes[d] == 1 && in.sizes[d] != 1) {
      reduced[num_reduced++] = d;
      g.reduce_numel *= in.sizes[d];
    } else {
      append_kept(g, in.sizes[d], in.strides[d], out.strides[d],
                  out2 != nullptr ? out2->strides[d] : 0);
      g.num_outputs *= in.sizes[d];
    }
  }
  // Largest stride outermost, so the innermost reduced index walks memory in order.
  std::stable_sort(reduced, reduced + num_reduced,
                   [&](int a, int b) { return std::abs(in.strides[a]) > std::abs(in.strides[b]); });
  for (int i = 0; i < num_reduced; ++i) {
    const int d = reduced[i];
    const int n = g.red_ndim;
    if (n > 0 && g.red_strides[n - 1] == in.strides[d] * in.sizes[d]) {
      g.red_sizes[n - 1] *= in.sizes[d];
      g.red_strides[n - 1] = in.strides[d];
    } else {
      g.red_sizes[n] = in.sizes[d];
      g.red_strides[n] = in.strides[d];
      g.red_ndim = n + 1;
    }
  }
  return g;
}

// Threads per output for this geometry (see the file comment).
int group_size(const ReduceGeometry& g) {
  const int k = g.kept_ndim;
  const bool columns = k > 0 && g.red_ndim > 0 && g.kept_in[k - 1] == 1 && g.kept_out[k - 1] == 1 &&
                       g.red_strides[g.red_ndim - 1] != 1;
  if (g.num_outputs >= 1024 && (columns || g.reduce_numel <= 16)) return 1;
  if (g.reduce_numel >= 8192 || g.num_outputs < 128) return kBlockThreads;
  return 32;
}

template <typename Op>
void launch_reduce(int device, const char* name, const ReduceGeometry& g, const Op& op,
                   std::initializer_list<const Operand*> ops) {
  if (g.num_outputs == 0) return;
  cudaStream_t stream = current_cuda_stream(device);
  switch (group_size(g)) {
    case 1: reduce_kernel<1><<<grid_for(g.num_outputs), kBlockThreads, 0, stream>>>(g, op); break;
    case 32:
      reduce_kernel<32>
          <<<grid_for(g.num_outputs, kBlockThreads / 32), kBlockThreads, 0, stream>>>(g, op);
      break;
    default:
      reduce_kernel<kBlockThreads><<<grid_for(g.num_outputs, 1), kBlockThreads, 0, stream>>>(g, op);
      break;
  }
  check_launch(name, ops);
}

template <Fold F>
void launch_fold(int device, const ReduceGeometry& g, bool mean, const Operand& out,
                 const Operand& in) {
  const char* name = "reduce_kernel";
  const bool integral = !is_floating(in.dtype);
  if constexpr (F == Fold::Sum || F == Fold::Prod) {
    if (integral)
      launch_reduce(device, name, g, FoldOp<F, int64_t>{mean}, {&out, &in});
    else
      launch_reduce(device, name, g, FoldOp<F, double>{mean}, {&out, &in});
  } else if constexpr (F == Fold::Max || F == Fold::Min) {
    if (integral)
      launch_reduce(device, name, g, FoldOp<F, int64_t>{false}, {&out, &in});
    else if (in.dtype == DType::Float64)
      launch_reduce(device, name, g, FoldOp<F, double>{false}, {&out, &in});
    else
      launch_reduce(device, name, g, FoldOp<F, float>{false}, {&out, &in});
  } else {
    launch_reduce(device, name, g, FoldOp<F, bool>{false}, {&out, &in});
  }
}

}  // namespace

// ---- entry points ----

void CudaBackend::reduce(ReduceOp op, const Operand& out, const Operand& in) {
  DeviceGuard guard(device_);
  const ReduceGeometry g = make_geometry(out, in, nullptr);
  switch (op) {
    case ReduceOp::Sum: return launch_fold<Fold::Sum>(device_, g, false, out, in);
    case ReduceOp::Mean: return launch_fold<Fold::Sum>(device_, g, true, out, in);
    case ReduceOp::Prod: return launch_fold<Fold::Prod>(device_, g, false, out, in);
    case ReduceOp::Max: return launch_fold<Fold::Max>(device_, g, false, out, in);
    case ReduceOp::Min: return launch_fold<Fold::Min>(device_, g, false, out, in);
    case ReduceOp::Any: return launch_fold<Fold::Any>(device_, g, false, out, in);
    case ReduceOp::All: return launch_fold<Fold::All>(device_, g, false, out, in);
  }
}

void CudaBackend::var(const Operand& out, const Operand& in, int64_t correction, bool take_sqrt) {
  DeviceGuard guard(device_);
  const ReduceGeometry g = make_geometry(out, in, nullptr);
  launch_reduce(device_, "var_kernel", g, VarOp{var_divisor(g.reduce_numel, correction), take_sqrt},
                {&out, &in});
}

void CudaBackend::arg_reduce(bool is_max, const Operand& values, const Operand& indices,
                             const Operand& in, int /*dim*/) {
  DeviceGuard guard(device_);
  // The reduced dim is the one where `indices` has size 1 and `in` does not; `values` has the
  // sizes of `indices` and its own strides.
  const ReduceGeometry g = make_geometry(indices, in, &values);
  if (g.reduce_numel == 0) return;  // the engine rejects empty reductions
  const char* name = "arg_reduce_kernel";
  if (!is_floating(in.dtype)) {
    launch_reduce(device_, name, g, ArgOp<int64_t>{is_max}, {&indices, &in});
  } else if (in.dtype == DType::Float64) {
    launch_reduce(device_, name, g, ArgOp<double>{is_max}, {&indices, &in});
  } else {
    launch_reduce(device_, name, g, ArgOp<float>{is_max}, {&indices, &in});
  }
}

void CudaBackend::logsumexp(const Operand& out, const Operand& in) {
  DeviceGuard guard(device_);
  launch_reduce(device_, "logsumexp_kernel", make_geometry(out, in, nullptr), LogSumExpOp{},
                {&out, &in});
}

void CudaBackend::norm(const Operand& out, const Operand& in, double p) {
  DeviceGuard guard(device_);
  launch_reduce(device_, "norm_kernel", make_geometry(out, in, nullptr),
                NormOp{NormAcc{norm_kind(p), p}}, {&out, &in});
}

}  // namespace memgrad::kernels::cuda
