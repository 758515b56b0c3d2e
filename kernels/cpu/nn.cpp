// CPU kernels of the nn layer: layer norm (forward, backward) and fused log-softmax + NLL.
// Rows are independent: OpenMP over rows (the layer norm's weight and bias gradients: partial
// sums over fixed chunks of rows, added in chunk order); float16 rows compute in float. The
// per-element formulas are kernels/nn_formulas.h, shared with the CUDA backend.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/element_types.h"
#include "kernels/nn_formulas.h"

namespace memgrad::kernels::cpu {
namespace {

template <typename T>
compute_t<T> at(const Operand& o, int64_t i) {
  return static_cast<compute_t<T>>(static_cast<const T*>(o.data)[i]);
}

template <typename T>
void put(const Operand& o, int64_t i, compute_t<T> v) {
  static_cast<T*>(o.data)[i] = static_cast<T>(v);
}

// Row sums in double over kLanes interleaved partial sums (element i into lane i % kLanes),
// added lane by lane at the end: independent chains, which the compiler turns into vector adds,
// where one running sum would wait on each add's latency. The order is fixed, so a sum does not
// depend on the thread count.
constexpr int64_t kLanes = 8;

template <typename F>
double interleaved_sum(int64_t n, F&& term) {
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += term(i + l);
  }
  for (; i < n; ++i) acc[i % kLanes] += term(i);
  double sum = 0.0;
  for (double a : acc) sum += a;
  return sum;
}

// Statistics use the same type as mean/rstd (float32, or float64 for float64 inputs).
template <typename T, typename S>
void layer_norm_rows(const Operand& y, const Operand& mean, const Operand& rstd, const Operand& x,
                     const Operand& w, const Operand& b, int64_t rows, int64_t n, double eps) {
  using C = compute_t<T>;
#pragma omp parallel for if (rows * n > 65536) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * n;
    auto xi = [&](int64_t i) { return static_cast<double>(at<T>(x, base + i)); };
    const double mu = interleaved_sum(n, xi) / static_cast<double>(n);
    const double sq = interleaved_sum(n, [&](int64_t i) {
      const double d = xi(i) - mu;
      return d * d;
    });
    const double inv = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
    static_cast<S*>(mean.data)[r] = static_cast<S>(mu);
    static_cast<S*>(rstd.data)[r] = static_cast<S>(inv);
    const bool has_w = w.data != nullptr, has_b = b.data != nullptr;
    for (int64_t i = 0; i < n; ++i) {
      const double xhat = layer_norm_xhat(static_cast<double>(at<T>(x, base + i)), mu, inv);
      put<T>(y, base + i,
             layer_norm_value<C>(xhat, has_w, has_w ? at<T>(w, i) : C(0), has_b,
                                 has_b ? at<T>(b, i) : C(0)));
    }
  }
}

// dx = rstd (dy w - mean(dy w) - xhat mean(dy w xhat)); dweight = sum dy xhat; dbias = sum dy.
// One pass over the rows, in chunks of kRowChunk rows spread over OpenMP threads: each row's dx,
// and each chunk's partial sums of dweight and dbias (in double, rows in order), which are then
// added chunk by chunk in chunk order. The chunks do not depend on the thread count, so neither do
// the sums. The partial sums are host memory (a std::vector), like the GEMM's packing buffers:
// 2 x chunks x n doubles (64 KiB for 2048 rows of 128), not in the allocator's statistics.
constexpr int64_t kRowChunk = 64;

template <typename T, typename S>
void layer_norm_backward_rows(const Operand& dx, const Operand& dw, const Operand& db,
                              const Operand& dy, const Operand& x, const Operand& mean,
                              const Operand& rstd, const Operand& w, int64_t rows, int64_t n) {
  const bool want_dx = dx.data != nullptr, want_dw = dw.data != nullptr;
  const bool want_db = db.data != nullptr;
  const int64_t chunks = (rows + kRowChunk - 1) / kRowChunk;
  std::vector<double> part_w(want_dw ? static_cast<size_t>(chunks * n) : 0);
  std::vector<double> part_b(want_db ? static_cast<size_t>(chunks * n) : 0);
#pragma omp parallel for if (rows * n > 65536) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    double* pw = want_dw ? part_w.data() + c * n : nullptr;
    double* pb = want_db ? part_b.data() + c * n : nullptr;
    // The row's xhat, dy and dy w, each computed once (the sums and dx read them again).
    std::vector<double> row(static_cast<size_t>(3 * n));
    double* xhat = row.data();
    double* g = xhat + n;
    double* gw = g + n;
    for (int64_t r = c * kRowChunk; r < std::min(rows, (c + 1) * kRowChunk); ++r) {
      const int64_t base = r * n;
      const double mu = static_cast<S*>(mean.data)[r];
      const double inv = static_cast<S*>(rstd.data)[r];
      for (int64_t i = 0; i < n; ++i) {
        xhat[i] = layer_norm_xhat(static_cast<double>(at<T>(x, base + i)), mu, inv);
        g[i] = static_cast<double>(at<T>(dy, base + i));
        gw[i] = w.data != nullptr ? g[i] * static_cast<double>(at<T>(w, i)) : g[i];
      }
      if (want_dx) {
        const double mg =
            interleaved_sum(n, [&](int64_t i) { return gw[i]; }) / static_cast<double>(n);
        const double mgx =
            interleaved_sum(n, [&](int64_t i) { return gw[i] * xhat[i]; }) / static_cast<double>(n);
        for (int64_t i = 0; i < n; ++i) {
          put<T>(dx, base + i,
                 static_cast<compute_t<T>>(layer_norm_dx(inv, gw[i], mg, xhat[i], mgx)));
        }
      }
      if (pw != nullptr) {
        for (int64_t i = 0; i < n; ++i) pw[i] += g[i] * xhat[i];
      }
      if (pb != nullptr) {
        for (int64_t i = 0; i < n; ++i) pb[i] += g[i];
      }
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    double sum_w = 0.0, sum_b = 0.0;
    for (int64_t c = 0; c < chunks; ++c) {
      if (want_dw) sum_w += part_w[static_cast<size_t>(c * n + i)];
      if (want_db) sum_b += part_b[static_cast<size_t>(c * n + i)];
    }
    if (want_dw) put<T>(dw, i, static_cast<compute_t<T>>(sum_w));
    if (want_db) put<T>(db, i, static_cast<compute_t<T>>(sum_b));
  }
}

// exp over a row of `n` values term(0..n) in blocks of at most kExpBlock, with Eigen's
// vectorised exp for double (libm's is one call per element); `use(first, block)` sees each
// block of exponentials in order.
constexpr int64_t kExpBlock = 512;
using ExpBlock = Eigen::Map<Eigen::ArrayXd>;

template <typename Term, typename Use>
void for_exp_blocks(int64_t n, Term&& term, Use&& use) {
  double buffer[kExpBlock];
  for (int64_t first = 0; first < n; first += kExpBlock) {
    const int64_t len = std::min(kExpBlock, n - first);
    for (int64_t j = 0; j < len; ++j) buffer[j] = term(first + j);
    ExpBlock block(buffer, len);
    block = block.exp();
    use(first, block);
  }
}

template <typename T>
IndexCheck cross_entropy_rows(const Operand& loss, const Operand& lp, const Operand& logits,
                              const Operand& target, int64_t ignore, double smoothing) {
  const int64_t rows = logits.sizes[0], classes = logits.sizes[1];
  const auto* tgt = static_cast<const int64_t*>(target.data);
  IndexCheck check;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = tgt[r];
    if (t != ignore && (t < 0 || t >= classes) && check.ok) check = IndexCheck{false, t, r};
  }
  if (!check.ok) return check;
#pragma omp parallel for if (rows * classes > 65536) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * classes;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < classes; ++c)
      mx = std::max(mx, static_cast<double>(at<T>(logits, base + c)));
    double sum = 0.0;
    for_exp_blocks(
        classes, [&](int64_t c) { return static_cast<double>(at<T>(logits, base + c)) - mx; },
        [&](int64_t, const ExpBlock& e) { sum += e.sum(); });
    const double lse = mx + std::log(sum);
    double sum_lp = 0.0;
    for (int64_t c = 0; c < classes; ++c) {
      const double v = static_cast<double>(at<T>(logits, base + c)) - lse;
      put<T>(lp, base + c, static_cast<compute_t<T>>(v));
      sum_lp += v;
    }
    const int64_t t = tgt[r];
    double l = 0.0;
    if (t != ignore) {
      const double picked = static_cast<double>(at<T>(lp, base + t));
      l = cross_entropy_loss(picked, sum_lp, smoothing, classes);
    }
    put<T>(loss, r, static_cast<compute_t<T>>(l));
  }
  return check;
}

template <typename T>
void cross_entropy_backward_rows(const Operand& grad, const Operand& grad_loss, const Operand& lp,
                                 const Operand& target, int64_t ignore, double smoothing,
                                 double scale) {
  const int64_t rows = lp.sizes[0], classes = lp.sizes[1];
  const auto* tgt = static_cast<const int64_t*>(target.data);
  const int64_t gstride = grad_loss.ndim > 0 ? grad_loss.strides[0] : 0;
  const double off = smoothing / static_cast<double>(classes);
#pragma omp parallel for if (rows * classes > 65536) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * classes;
    const int64_t t = tgt[r];
    const double g = t == ignore ? 0.0 : static_cast<double>(at<T>(grad_loss, r * gstride)) * scale;
    for_exp_blocks(
        classes, [&](int64_t c) { return static_cast<double>(at<T>(lp, base + c)); },
        [&](int64_t first, const ExpBlock& p) {
          for (int64_t j = 0; j < p.size(); ++j) {
            const int64_t c = first + j;
            const double v = cross_entropy_grad_from_prob(g, p[j], c == t, smoothing, off);
            put<T>(grad, base + c, static_cast<compute_t<T>>(v));
          }
        });
  }
}

}  // namespace

void CpuBackend::layer_norm(const Operand& y, const Operand& mean, const Operand& rstd,
                            const Operand& x, const Operand& weight, const Operand& bias,
                            int64_t rows, int64_t n, double eps) {
  dispatch_floating(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (mean.dtype == DType::Float64) {
      layer_norm_rows<T, double>(y, mean, rstd, x, weight, bias, rows, n, eps);
    } else {
      layer_norm_rows<T, float>(y, mean, rstd, x, weight, bias, rows, n, eps);
    }
  });
}

void CpuBackend::layer_norm_backward(const Operand& dx, const Operand& dweight,
                                     const Operand& dbias, const Operand& dy, const Operand& x,
                                     const Operand& mean, const Operand& rstd,
                                     const Operand& weight, int64_t rows, int64_t n) {
  dispatch_floating(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (mean.dtype == DType::Float64) {
      layer_norm_backward_rows<T, double>(dx, dweight, dbias, dy, x, mean, rstd, weight, rows, n);
    } else {
      layer_norm_backward_rows<T, float>(dx, dweight, dbias, dy, x, mean, rstd, weight, rows, n);
    }
  });
}

IndexCheck CpuBackend::cross_entropy(const Operand& loss, const Operand& log_probs,
                                     const Operand& logits, const Operand& target,
                                     int64_t ignore_index, double smoothing) {
  return dispatch_floating(logits.dtype, [&](auto tag) {
    return cross_entropy_rows<decltype(tag)>(loss, log_probs, logits, target, ignore_index,
                                             smoothing);
  });
}

void CpuBackend::cross_entropy_backward(const Operand& grad_logits, const Operand& grad_loss,
                                        const Operand& log_probs, const Operand& target,
                                        int64_t ignore_index, double smoothing, double scale) {
  dispatch_floating(log_probs.dtype, [&](auto tag) {
    cross_entropy_backward_rows<decltype(tag)>(grad_logits, grad_loss, log_probs, target,
                                               ignore_index, smoothing, scale);
  });
}

}  // namespace memgrad::kernels::cpu
