// CPU GEMM: C = alpha A @ B + beta C for float32/float64 through OpenBLAS (cblas_sgemm /
// cblas_dgemm) when the build found it, through Eigen's GEMM otherwise; float16 converts to
// float, multiplies in float and rounds the result back (PyTorch's CPU behaviour).
//
// Operands reach BLAS without copying when they are row-major (col_stride 1, ld = row_stride)
// or transposed row-major (row_stride 1, ld = col_stride). Anything else is packed into a
// contiguous temporary first. Such temporaries (and float16's float copies) are host
// std::vectors, not device memory: they never show in the allocator's statistics, and the
// engine avoids them for float32/64 by making odd-strided operands contiguous before the call.
//
// Batches (both levels, outer x batch): many small products run one per OpenMP thread
// (OpenBLAS's OpenMP build then runs each call on one thread); large products run one after
// another. A large product with many more rows than columns (a linear layer's forward and input
// gradient: tokens x features) is cut into one band of rows per thread, each band one
// single-threaded call: 5-25% faster than OpenBLAS's own threading of the same product on a
// 2-core Zen 3 (its threads share the packed B and wait for each other; the bands pack their
// small B twice and never wait). Each element is the sum a single-threaded call makes, in the
// same order (see kBandAlign), whatever the number of threads. Two independent products
// (gemm_pair) run side by side, one single-threaded call per thread.
#include "kernels/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <exception>
#include <vector>

#include <Eigen/Core>
#ifdef MEMGRAD_USE_OPENBLAS
#include <cblas.h>
#endif

#include "allocator/error.h"
#include "kernels/cpu/element_types.h"

namespace memgrad::kernels::cpu {
namespace {

// Work per product (m n k) below which batches are spread over threads instead of letting one
// product use several threads (OpenBLAS itself stays single-threaded below 2^18).
constexpr int64_t kSmallGemmWork = int64_t{1} << 20;
// Row bands: at least this many rows per thread (fewer would leave the bands unequal by up to
// half of kBandAlign: a 512 x 128 x 2048 weight gradient ran slower in bands of 288 and 224
// rows than on OpenBLAS's threads), and m >= kBandAspect x n. Band edges fall on
// multiples of kBandAlign rows: OpenBLAS steps through a row-major C's rows in groups (24 in
// the Zen and Haswell SGEMM kernels, 8 or 16 in others) and sums the last, partial group
// differently, so a band edge inside a group would change that group's last bits. 96 is a
// multiple of every group size of the x86-64 kernels.
constexpr int64_t kMinBandRows = 512;
constexpr int64_t kBandAspect = 2;
constexpr int64_t kBandAlign = 96;

// One operand as BLAS reads it. Row-major (trans false): element (i, j) at i * ld + j; the
// transpose of a row-major matrix (trans true): element (i, j) at i + j * ld. In elements.
template <typename T>
struct Mat {
  const T* data = nullptr;
  int64_t ld = 1;
  bool trans = false;
  int64_t batch_stride = 0;
};

// Whether a rows x cols operand with strides (rs, cs) is a BLAS operand as it stands. Size-1
// dims may carry any stride; ld must be at least the row (column) length, as BLAS requires.
bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int64_t& ld, bool& trans) {
  if (cs == 1 || cols == 1) {
    trans = false;
    ld = rows == 1 ? std::max<int64_t>(1, cols) : rs;
    if (ld >= std::max<int64_t>(1, cols)) return true;
  }
  if (rs == 1 || rows == 1) {
    trans = true;
    ld = cols == 1 ? std::max<int64_t>(1, rows) : cs;
    if (ld >= std::max<int64_t>(1, rows)) return true;
  }
  return false;
}

// Whether BLAS reads the rows x cols operand `arg` in place (prepare() would not pack it).
bool blas_readable(const MatrixArg& arg, int64_t rows, int64_t cols) {
  int64_t ld = 1;
  bool trans = false;
  return blas_layout(rows, cols, arg.row_stride, arg.col_stride, ld, trans);
}

// Copies (and converts to D) `batch` rows x cols matrices of any strides into `buf`, row-major
// and contiguous. A batch_stride of 0 (one shared matrix) packs that matrix once.
template <typename D, typename S>
Mat<D> pack(const MatrixArg& arg, int64_t rows, int64_t cols, int64_t batch, std::vector<D>& buf) {
  const int64_t count = arg.batch_stride == 0 ? 1 : batch;
  buf.resize(static_cast<size_t>(count * rows * cols));
  const S* src = static_cast<const S*>(arg.data);
  for (int64_t b = 0; b < count; ++b) {
    const S* m = src + b * arg.batch_stride;
    D* out = buf.data() + b * rows * cols;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        out[i * cols + j] = static_cast<D>(m[i * arg.row_stride + j * arg.col_stride]);
      }
    }
  }
  return Mat<D>{buf.data(), std::max<int64_t>(1, cols), false, count == 1 ? 0 : rows * cols};
}

// The operand as BLAS reads it: in place when its strides allow, else packed into `buf`.
template <typename T>
Mat<T> prepare(const MatrixArg& arg, int64_t rows, int64_t cols, int64_t batch,
               std::vector<T>& buf) {
  Mat<T> m;
  if (blas_layout(rows, cols, arg.row_stride, arg.col_stride, m.ld, m.trans)) {
    m.data = static_cast<const T*>(arg.data);
    m.batch_stride = arg.batch_stride;
    return m;
  }
  return pack<T, T>(arg, rows, cols, batch, buf);
}

// One product through Eigen: maps over the operands, no copies (the transposed case maps the
// memory as column-major).
template <typename T>
void eigen_gemm(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, bool ta,
                const T* b, int64_t ldb, bool tb, T beta, T* c, int64_t ldc) {
  using Dyn = Eigen::Index;
  using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ColMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  using Stride = Eigen::OuterStride<>;
  Eigen::Map<RowMat, 0, Stride> C(c, Dyn(m), Dyn(n), Stride(ldc));
  auto run = [&](const auto& A, const auto& B) {
    if (beta == T(0)) {
      C.noalias() = alpha * (A * B);
    } else {
      if (beta != T(1)) C *= beta;
      C.noalias() += alpha * (A * B);
    }
  };
  auto with_b = [&](const auto& A) {
    if (tb) {
      run(A, Eigen::Map<const ColMat, 0, Stride>(b, Dyn(k), Dyn(n), Stride(ldb)));
    } else {
      run(A, Eigen::Map<const RowMat, 0, Stride>(b, Dyn(k), Dyn(n), Stride(ldb)));
    }
  };
  if (ta) {
    with_b(Eigen::Map<const ColMat, 0, Stride>(a, Dyn(m), Dyn(k), Stride(lda)));
  } else {
    with_b(Eigen::Map<const RowMat, 0, Stride>(a, Dyn(m), Dyn(k), Stride(lda)));
  }
}

// One product: OpenBLAS when present and every extent fits its 32-bit int, Eigen otherwise.
template <typename T>
void gemm_one(int64_t m, int64_t n, int64_t k, T alpha, const Mat<T>& a, const T* pa,
              const Mat<T>& b, const T* pb, T beta, T* c, int64_t ldc) {
#ifdef MEMGRAD_USE_OPENBLAS
  const int64_t largest = std::max({m, n, k, a.ld, b.ld, ldc});
  if (largest <= INT_MAX) {
    if (beta == T(0)) {
      // OpenBLAS scales C by beta in a pass of its own before its kernel adds alpha A B, and
      // for beta 0 that pass is several times slower than filling the same rows with zeros
      // (190 us against 32 us for a 512 x 784 C on a Zen 3). The kernel adds to zeros either
      // way, so the result is the same to the bit; only C's m x n elements are written.
      for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, T(0));
      beta = T(1);
    }
    const auto ta = a.trans ? CblasTrans : CblasNoTrans;
    const auto tb = b.trans ? CblasTrans : CblasNoTrans;
    const auto im = static_cast<blasint>(m), in = static_cast<blasint>(n);
    const auto ik = static_cast<blasint>(k);
    if constexpr (std::is_same_v<T, float>) {
      cblas_sgemm(CblasRowMajor, ta, tb, im, in, ik, alpha, pa, static_cast<blasint>(a.ld), pb,
                  static_cast<blasint>(b.ld), beta, c, static_cast<blasint>(ldc));
    } else {
      cblas_dgemm(CblasRowMajor, ta, tb, im, in, ik, alpha, pa, static_cast<blasint>(a.ld), pb,
                  static_cast<blasint>(b.ld), beta, c, static_cast<blasint>(ldc));
    }
    return;
  }
#endif
  eigen_gemm<T>(m, n, k, alpha, pa, a.ld, a.trans, pb, b.ld, b.trans, beta, c, ldc);
}

// One product cut into `threads` bands of C's rows (A's rows with them, B whole), each band a
// single-threaded call on its own thread (OpenBLAS's OpenMP build runs a call made inside a
// parallel region on the calling thread alone).
template <typename T>
void gemm_row_bands(const GemmArgs& g, T alpha, const Mat<T>& a, const T* pa, const Mat<T>& b,
                    const T* pb, T beta, T* c, int64_t ldc, int64_t threads) {
  const int64_t band =
      std::max<int64_t>(kBandAlign, (g.m / threads + kBandAlign / 2) / kBandAlign * kBandAlign);
  // Row r of A: r * ld elements on for a row-major A, r for a transposed one.
  const int64_t a_row_step = a.trans ? 1 : a.ld;
  const int team = static_cast<int>(threads);
#pragma omp parallel for schedule(static) num_threads(team)
  for (int64_t t = 0; t < threads; ++t) {
    // The last band takes what is left.
    const int64_t first = t * band,
                  rows = t + 1 == threads ? g.m - first : std::min(band, g.m - first);
    if (rows > 0) {
      gemm_one<T>(rows, g.n, g.k, alpha, a, pa + first * a_row_step, b, pb, beta, c + first * ldc,
                  ldc);
    }
  }
}

// All outer x batch products of C = alpha A B + beta C on prepared operands (k > 0). Both
// batch levels run in one loop, so small products share one OpenMP region however their batch
// dims are laid out (attention's 32 sequences x 4 heads: one region, not 32).
template <typename T>
void gemm_batches(const GemmArgs& g, const Mat<T>& a, const Mat<T>& b, T* c, int64_t ldc,
                  int64_t batch_stride_c) {
  const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
  const int64_t products = g.outer * g.batch, work = g.m * g.n * g.k;
  const bool spread = products > 1 && work < kSmallGemmWork && !omp_in_parallel();
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool bands = !spread && threads > 1 && g.m >= kMinBandRows * threads &&
                     g.m >= kBandAspect * g.n && work >= kSmallGemmWork;
  auto one = [&](int64_t flat) {
    const int64_t o = flat / g.batch, i = flat % g.batch;
    const T* pa = a.data + o * g.outer_stride_a + i * a.batch_stride;
    const T* pb = b.data + o * g.outer_stride_b + i * b.batch_stride;
    T* pc = c + o * g.outer_stride_c + i * batch_stride_c;
    if (bands) {
      gemm_row_bands<T>(g, alpha, a, pa, b, pb, beta, pc, ldc, threads);
    } else {
      gemm_one<T>(g.m, g.n, g.k, alpha, a, pa, b, pb, beta, pc, ldc);
    }
  };
  if (spread) {
#pragma omp parallel for schedule(static)
    for (int64_t flat = 0; flat < products; ++flat) one(flat);
    return;
  }
  for (int64_t flat = 0; flat < products; ++flat) one(flat);
}

// C = beta C (k == 0: the product is empty). beta == 0 writes zeros, whatever C held.
template <typename T>
void scale_c(const GemmArgs& g) {
  T* c = static_cast<T*>(g.c);
  const float beta = static_cast<float>(g.beta);
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t i = 0; i < g.m; ++i) {
      T* row = c + b * g.batch_stride_c + i * g.ldc;
      for (int64_t j = 0; j < g.n; ++j) {
        if constexpr (is_reduced_v<T>) {
          row[j] = g.beta == 0.0 ? T(0.0f) : T(static_cast<float>(row[j]) * beta);
        } else {
          row[j] = g.beta == 0.0 ? T(0) : static_cast<T>(row[j] * static_cast<T>(g.beta));
        }
      }
    }
  }
}

// float16 and bfloat16: A and B converted to float, C computed in a float buffer (loaded first
// when beta != 0), then rounded back to 16 bits.
template <typename H>
void gemm_reduced(const GemmArgs& g) {
  std::vector<float> abuf, bbuf, cbuf(static_cast<size_t>(g.batch * g.m * g.n));
  const Mat<float> a = pack<float, H>(g.a, g.m, g.k, g.batch, abuf);
  const Mat<float> b = pack<float, H>(g.b, g.k, g.n, g.batch, bbuf);
  H* c = static_cast<H*>(g.c);
  auto for_each_c = [&](auto&& fn) {
    for (int64_t bi = 0; bi < g.batch; ++bi) {
      for (int64_t i = 0; i < g.m; ++i) {
        for (int64_t j = 0; j < g.n; ++j) {
          const auto flat = static_cast<size_t>((bi * g.m + i) * g.n + j);
          fn(c[bi * g.batch_stride_c + i * g.ldc + j], cbuf[flat]);
        }
      }
    }
  };
  if (g.beta != 0.0) for_each_c([](const H& h, float& f) { f = static_cast<float>(h); });
  gemm_batches<float>(g, a, b, cbuf.data(), g.n, g.m * g.n);
  for_each_c([](H& h, const float& f) { h = H(f); });
}

}  // namespace

// With two threads to give them, each product runs on one of them at once, single-threaded (a
// call made inside a parallel region stays on its thread: gemm_batches and OpenBLAS's OpenMP
// build both check), so each result is the one a single-threaded gemm() gives, whatever the
// number of threads. A linear layer's input and weight gradients are such a pair, of equal
// work (linear_backward). On a 2-core Zen 3, in one process alternating blocks of training
// steps with and without the pair, the benchmarks' MLP step (128 rows, where every product
// was on OpenBLAS's threads) took 2.5 to 8% less time, the transformer's (2048 rows, where the
// input gradient already ran in row bands) 0.7 to 2% less.
void CpuBackend::gemm_pair(const GemmArgs& first, const GemmArgs& second) {
  if (omp_in_parallel() || omp_get_max_threads() < 2) {
    KernelBackend::gemm_pair(first, second);  // one after the other
    return;
  }
  const GemmArgs* products[2] = {&first, &second};
  std::exception_ptr errors[2];
#pragma omp parallel num_threads(2)
  {
    // A team of one (OpenMP may grant fewer threads than asked) runs both.
    for (int i = omp_get_thread_num(); i < 2; i += omp_get_num_threads()) {
      try {
        gemm(*products[i]);
      } catch (...) {
        errors[i] = std::current_exception();  // no exception may leave a parallel region
      }
    }
  }
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

void CpuBackend::gemm(const GemmArgs& args) {
  if (args.batch == 0 || args.outer == 0 || args.m == 0 || args.n == 0) return;
  // The paths that copy operands (16-bit floats, or an operand BLAS cannot read in place) and the
  // empty product handle one batch level: they run the outer groups one by one.
  if (args.outer > 1 &&
      (args.k == 0 || is_reduced_float(args.dtype) || !blas_readable(args.a, args.m, args.k) ||
       !blas_readable(args.b, args.k, args.n))) {
    for (int64_t o = 0; o < args.outer; ++o) gemm(gemm_group(args, o));
    return;
  }
  GemmArgs g = args;
  // A one-row C never steps to a second row, but BLAS still insists on ldc >= n.
  if (g.m == 1) g.ldc = std::max<int64_t>(g.ldc, g.n);
  if (g.k == 0) {
    dispatch_floating(g.dtype, [&](auto tag) { scale_c<decltype(tag)>(g); });
    return;
  }
  switch (g.dtype) {
    case DType::Float32:
    case DType::Float64:
      dispatch_floating(g.dtype, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!is_reduced_v<T>) {
          std::vector<T> abuf, bbuf;
          const Mat<T> a = prepare<T>(g.a, g.m, g.k, g.batch, abuf);
          const Mat<T> b = prepare<T>(g.b, g.k, g.n, g.batch, bbuf);
          gemm_batches<T>(g, a, b, static_cast<T*>(g.c), g.ldc, g.batch_stride_c);
        }
      });
      return;
    case DType::Float16: gemm_reduced<half>(g); return;
    case DType::BFloat16: gemm_reduced<bfloat16>(g); return;
    default: internal_check(false, "gemm: dtype must be float32, float64, float16 or bfloat16");
  }
}

}  // namespace memgrad::kernels::cpu
