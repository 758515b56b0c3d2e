// CUDA kernels of the nn layer: layer norm (forward, backward) and fused log-softmax + NLL
// (cross entropy, forward and backward), on contiguous operands, with the CPU's arithmetic
// (kernels/cpu/nn.cpp): row statistics in double, float16 rows computed in float.
//
// Launch configuration:
//   row kernels      a group of G threads per row (G = 32: a warp, 8 rows per 256-thread
//                    block, when the row has at most 1024 elements; G = 256: a block per row
//                    otherwise), grid-stride over rows; the group combines its partial sums
//                    with group_reduce, so results are deterministic;
//   dweight / dbias  32 x 8 thread blocks: x is the column, y strides over the rows, and the
//                    eight partial column sums are added in a fixed order in shared memory;
//   CE backward      one thread per logit.
// cross_entropy first checks every target (index_check_kernel, one wait for the device) and
// writes nothing when one is out of range. No temporaries are allocated. The per-element
// formulas are kernels/nn_formulas.h, the text the CPU backend runs too.
#include "kernels/cuda/cuda_backend.h"

#include "allocator/cuda_check.h"
#include "kernels/cuda/cuda_handles.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/nn_formulas.h"

namespace memgrad::kernels::cuda {
namespace {

constexpr int64_t kWarpRowLimit = 1024;
constexpr int kColumnBlockX = 32, kColumnBlockY = 8;

struct LayerNormArgs {
  void* y;
  void* mean;
  void* rstd;
  const void* x;
  const void* weight;  // may be null
  const void* bias;    // may be null
  int64_t rows, n;
  double eps;
};

struct LayerNormGradArgs {
  void* dx;  // may be null
  void* dweight;
  void* dbias;
  const void* dy;
  const void* x;
  const void* mean;
  const void* rstd;
  const void* weight;
  int64_t rows, n;
};

struct CrossEntropyArgs {
  void* loss;
  void* log_probs;
  const void* logits;
  const int64_t* target;
  int64_t rows, classes, ignore;
  double smoothing;
};

// ---- kernels section ----

__device__ __forceinline__ double add(double a, double b) { return a + b; }

// Rows r = group, group + groups, ... of a grid of G-thread groups; calls fn(r, lane).
template <int G, typename Fn>
__device__ __forceinline__ void for_each_row(int64_t rows, Fn&& fn) {
  const int lane = static_cast<int>(threadIdx.x) % G;
  const int64_t per_block = blockDim.x / G;
  for (int64_t r = blockIdx.x * per_block + threadIdx.x / G; r < rows;
       r += static_cast<int64_t>(gridDim.x) * per_block) {
    fn(r, lane);
  }
}

template <int G, typename T, typename S>
__global__ void layer_norm_kernel(LayerNormArgs a) {
  using C = compute_t<T>;
  const auto* x = static_cast<const T*>(a.x);
  const auto* w = static_cast<const T*>(a.weight);
  const auto* b = static_cast<const T*>(a.bias);
  for_each_row<G>(a.rows, [&](int64_t r, int lane) {
    const T* xr = x + r * a.n;
    double sum = 0.0;
    for (int64_t i = lane; i < a.n; i += G) sum += to_compute<double>(xr[i]);
    const double mu = group_reduce<G>(sum, add) / static_cast<double>(a.n);
    double sq = 0.0;
    for (int64_t i = lane; i < a.n; i += G) {
      const double d = to_compute<double>(xr[i]) - mu;
      sq += d * d;
    }
    sq = group_reduce<G>(sq, add);
    const double inv = 1.0 / sqrt(sq / static_cast<double>(a.n) + a.eps);
    if (lane == 0) {
      static_cast<S*>(a.mean)[r] = static_cast<S>(mu);
      static_cast<S*>(a.rstd)[r] = static_cast<S>(inv);
    }
    T* yr = static_cast<T*>(a.y) + r * a.n;
    for (int64_t i = lane; i < a.n; i += G) {
      const double xhat = layer_norm_xhat(to_compute<double>(xr[i]), mu, inv);
      yr[i] = from_compute<T>(
          layer_norm_value<C>(xhat, w != nullptr, w != nullptr ? to_compute<C>(w[i]) : C(0),
                              b != nullptr, b != nullptr ? to_compute<C>(b[i]) : C(0)));
    }
  });
}

// dx = rstd (dy w - mean(dy w) - xhat mean(dy w xhat)), per row.
template <int G, typename T, typename S>
__global__ void layer_norm_dx_kernel(LayerNormGradArgs a) {
  const auto* x = static_cast<const T*>(a.x);
  const auto* dy = static_cast<const T*>(a.dy);
  const auto* w = static_cast<const T*>(a.weight);
  for_each_row<G>(a.rows, [&](int64_t r, int lane) {
    const double mu = static_cast<const S*>(a.mean)[r];
    const double inv = static_cast<const S*>(a.rstd)[r];
    const int64_t base = r * a.n;
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t i = lane; i < a.n; i += G) {
      const double xhat = layer_norm_xhat(to_compute<double>(x[base + i]), mu, inv);
      const double g = to_compute<double>(dy[base + i]);
      const double gw = w != nullptr ? g * to_compute<double>(w[i]) : g;
      sum_g += gw;
      sum_gx += gw * xhat;
    }
    const double mg = group_reduce<G>(sum_g, add) / static_cast<double>(a.n);
    const double mgx = group_reduce<G>(sum_gx, add) / static_cast<double>(a.n);
    T* dx = static_cast<T*>(a.dx) + base;
    for (int64_t i = lane; i < a.n; i += G) {
      const double xhat = layer_norm_xhat(to_compute<double>(x[base + i]), mu, inv);
      const double g = to_compute<double>(dy[base + i]);
      const double gw = w != nullptr ? g * to_compute<double>(w[i]) : g;
      dx[i] = from_compute<T>(layer_norm_dx(inv, gw, mg, xhat, mgx));
    }
  });
}

// dweight = sum over rows of dy xhat, dbias = sum of dy; blockDim (32, 8).
template <typename T, typename S>
__global__ void layer_norm_dweight_kernel(LayerNormGradArgs a) {
  __shared__ double part_w[kColumnBlockY][kColumnBlockX];
  __shared__ double part_b[kColumnBlockY][kColumnBlockX];
  const auto* x = static_cast<const T*>(a.x);
  const auto* dy = static_cast<const T*>(a.dy);
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kColumnBlockX + threadIdx.x;
  double acc_w = 0.0, acc_b = 0.0;
  if (col < a.n) {
    for (int64_t r = threadIdx.y; r < a.rows; r += kColumnBlockY) {
      const double mu = static_cast<const S*>(a.mean)[r];
      const double inv = static_cast<const S*>(a.rstd)[r];
      const double g = to_compute<double>(dy[r * a.n + col]);
      acc_w += g * layer_norm_xhat(to_compute<double>(x[r * a.n + col]), mu, inv);
      acc_b += g;
    }
  }
  part_w[threadIdx.y][threadIdx.x] = acc_w;
  part_b[threadIdx.y][threadIdx.x] = acc_b;
  __syncthreads();
  if (threadIdx.y != 0 || col >= a.n) return;
  for (int k = 1; k < kColumnBlockY; ++k) {
    acc_w += part_w[k][threadIdx.x];
    acc_b += part_b[k][threadIdx.x];
  }
  if (a.dweight != nullptr) static_cast<T*>(a.dweight)[col] = from_compute<T>(acc_w);
  if (a.dbias != nullptr) static_cast<T*>(a.dbias)[col] = from_compute<T>(acc_b);
}

template <int G, typename T>
__global__ void cross_entropy_kernel(CrossEntropyArgs a) {
  const auto* logits = static_cast<const T*>(a.logits);
  for_each_row<G>(a.rows, [&](int64_t r, int lane) {
    const T* x = logits + r * a.classes;
    double mx = -INFINITY;
    for (int64_t c = lane; c < a.classes; c += G) {
      const double v = to_compute<double>(x[c]);
      mx = v > mx ? v : mx;  // the CPU's std::max: a NaN does not become the max
    }
    mx = group_reduce<G>(mx, [](double p, double q) { return q > p ? q : p; });
    double sum = 0.0;
    for (int64_t c = lane; c < a.classes; c += G) sum += exp(to_compute<double>(x[c]) - mx);
    const double lse = mx + log(group_reduce<G>(sum, add));
    T* lp = static_cast<T*>(a.log_probs) + r * a.classes;
    double sum_lp = 0.0;
    for (int64_t c = lane; c < a.classes; c += G) {
      const double v = to_compute<double>(x[c]) - lse;
      lp[c] = from_compute<T>(v);
      sum_lp += v;
    }
    sum_lp = group_reduce<G>(sum_lp, add);
    if (lane != 0) return;
    const int64_t t = a.target[r];
    double l = 0.0;
    if (t != a.ignore) {
      // The CPU reads the stored (rounded) log-probability back.
      const double picked = to_compute<double>(from_compute<T>(to_compute<double>(x[t]) - lse));
      l = cross_entropy_loss(picked, sum_lp, a.smoothing, a.classes);
    }
    static_cast<T*>(a.loss)[r] = from_compute<T>(l);
  });
}

// grad = grad_loss[row] scale (exp(log_probs) - (1 - s) onehot(target) - s / C), 0 if ignored.
template <typename T>
__global__ void cross_entropy_backward_kernel(T* grad, const T* grad_loss, int64_t gstride,
                                              const T* log_probs, const int64_t* target,
                                              int64_t rows, int64_t classes, int64_t ignore,
                                              double smoothing, double scale) {
  const double off = smoothing / static_cast<double>(classes);
  for (int64_t i = thread_index(); i < rows * classes; i += grid_stride()) {
    const int64_t r = i / classes, c = i - r * classes;
    const int64_t t = target[r];
    const double g = t == ignore ? 0.0 : to_compute<double>(grad_loss[r * gstride]) * scale;
    grad[i] = from_compute<T>(
        cross_entropy_grad(g, to_compute<double>(log_probs[i]), c == t, smoothing, off));
  }
}

// ---- launchers section ----

// Launches kernel<G> with a warp per row for short rows, a block per row otherwise.
template <typename Warp, typename Block, typename Args>
void launch_rows(int64_t rows, int64_t n, cudaStream_t stream, Warp warp, Block block,
                 const Args& args) {
  if (n <= kWarpRowLimit) {
    warp<<<grid_for(rows, kBlockThreads / 32), kBlockThreads, 0, stream>>>(args);
  } else {
    block<<<grid_for(rows, 1), kBlockThreads, 0, stream>>>(args);
  }
}

}  // namespace

// ---- entry points ----

void CudaBackend::layer_norm(const Operand& y, const Operand& mean, const Operand& rstd,
                             const Operand& x, const Operand& weight, const Operand& bias,
                             int64_t rows, int64_t n, double eps) {
  if (rows == 0 || n == 0) return;
  DeviceGuard guard(device_);
  const LayerNormArgs args{y.data,    mean.data, rstd.data, x.data, weight.data,
                           bias.data, rows,      n,         eps};
  cudaStream_t stream = current_cuda_stream(device_);
  dispatch_floating(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (mean.dtype == DType::Float64) {
      launch_rows(rows, n, stream, layer_norm_kernel<32, T, double>,
                  layer_norm_kernel<kBlockThreads, T, double>, args);
    } else {
      launch_rows(rows, n, stream, layer_norm_kernel<32, T, float>,
                  layer_norm_kernel<kBlockThreads, T, float>, args);
    }
  });
  check_launch("layer_norm_kernel", {&y, &mean, &rstd, &x});
}

void CudaBackend::layer_norm_backward(const Operand& dx, const Operand& dweight,
                                      const Operand& dbias, const Operand& dy, const Operand& x,
                                      const Operand& mean, const Operand& rstd,
                                      const Operand& weight, int64_t rows, int64_t n) {
  if (rows == 0 || n == 0) return;
  DeviceGuard guard(device_);
  const LayerNormGradArgs args{dx.data,   dweight.data, dbias.data,  dy.data, x.data,
                               mean.data, rstd.data,    weight.data, rows,    n};
  cudaStream_t stream = current_cuda_stream(device_);
  const bool want_columns = dweight.data != nullptr || dbias.data != nullptr;
  const dim3 column_block(kColumnBlockX, kColumnBlockY);
  const unsigned column_grid = static_cast<unsigned>((n + kColumnBlockX - 1) / kColumnBlockX);
  dispatch_floating(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (mean.dtype == DType::Float64) {
      if (dx.data != nullptr) {
        launch_rows(rows, n, stream, layer_norm_dx_kernel<32, T, double>,
                    layer_norm_dx_kernel<kBlockThreads, T, double>, args);
      }
      if (want_columns)
        layer_norm_dweight_kernel<T, double><<<column_grid, column_block, 0, stream>>>(args);
    } else {
      if (dx.data != nullptr) {
        launch_rows(rows, n, stream, layer_norm_dx_kernel<32, T, float>,
                    layer_norm_dx_kernel<kBlockThreads, T, float>, args);
      }
      if (want_columns)
        layer_norm_dweight_kernel<T, float><<<column_grid, column_block, 0, stream>>>(args);
    }
  });
  check_launch("layer_norm_backward_kernel", {&dx, &dy, &x, &mean, &rstd});
}

IndexCheck CudaBackend::cross_entropy(const Operand& loss, const Operand& log_probs,
                                      const Operand& logits, const Operand& target,
                                      int64_t ignore_index, double smoothing) {
  DeviceGuard guard(device_);
  const int64_t rows = logits.sizes[0], classes = logits.sizes[1];
  const IndexCheck check = check_index_range(device_, target, classes, &ignore_index);
  if (!check.ok || rows == 0) return check;
  const CrossEntropyArgs args{
      loss.data, log_probs.data, logits.data,  static_cast<const int64_t*>(target.data),
      rows,      classes,        ignore_index, smoothing};
  cudaStream_t stream = current_cuda_stream(device_);
  dispatch_floating(logits.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_rows(rows, classes, stream, cross_entropy_kernel<32, T>,
                cross_entropy_kernel<kBlockThreads, T>, args);
  });
  check_launch("cross_entropy_kernel", {&loss, &log_probs, &logits, &target});
  return check;
}

void CudaBackend::cross_entropy_backward(const Operand& grad_logits, const Operand& grad_loss,
                                         const Operand& log_probs, const Operand& target,
                                         int64_t ignore_index, double smoothing, double scale) {
  const int64_t rows = log_probs.sizes[0], classes = log_probs.sizes[1];
  if (rows * classes == 0) return;
  DeviceGuard guard(device_);
  const int64_t gstride = grad_loss.ndim > 0 ? grad_loss.strides[0] : 0;
  dispatch_floating(log_probs.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cross_entropy_backward_kernel<T>
        <<<grid_for(rows * classes), kBlockThreads, 0, current_cuda_stream(device_)>>>(
            static_cast<T*>(grad_logits.data), static_cast<const T*>(grad_loss.data), gstride,
            static_cast<const T*>(log_probs.data), static_cast<const int64_t*>(target.data), rows,
            classes, ignore_index, smoothing, scale);
  });
  check_launch("cross_entropy_backward_kernel", {&grad_logits, &grad_loss, &log_probs, &target});
}

}  // namespace memgrad::kernels::cuda
