// CPU softmax / log_softmax along one dim, and their backward.
//
// A "row" is the line of elements along `dim` through one position of the other dims. Paths:
//   rows     dim is innermost and contiguous in every operand (one float/double dtype): per row
//            one pass for the max, one for exp and its sum (Eigen's vectorised exp), one to
//            normalise; rows spread over OpenMP threads;
//   columns  dim is not innermost but the innermost other dim is contiguous everywhere (one
//            float/double dtype): up to kColumnWidth neighbouring rows are processed together so
//            every pass reads memory in order and vectorises across them;
//   strided  anything else, float16 and mixed dtypes: one row at a time through strided loads,
//            computing in float (double for float64).
// Forward: y = exp(x - max) / sum(exp(x - max)); log: y = x - max - log(sum(exp(x - max))).
// Backward (y is the forward output): softmax gx = y (g - sum(g y)); log_softmax
// gx = g - exp(y) sum(g). Row statistics live in registers or stack buffers: no temporaries.
// Every pass is elementwise within a row, so `out` may alias `in` (and grad_in grad_out).
// The strided path's per-element formulas are kernels/softmax_formulas.h, shared with CUDA.
#include "kernels/cpu/cpu_backend.h"

#include <cmath>

#include "kernels/cpu/element_types.h"
#include "kernels/cpu/reduce_util.h"
#include "kernels/cpu/strided_iter.h"
#include "kernels/softmax_formulas.h"

namespace memgrad::kernels::cpu {
namespace {

// Neighbouring rows the column path processes together: each pass reads segments of up to
// 4 KiB (float32) per element along dim, long enough for the hardware prefetcher.
constexpr int64_t kColumnWidth = 1024;
// Elements per exp block in the row path (a stack buffer for log_softmax).
constexpr int64_t kExpBlock = 1024;

// K operands seen as rows along `dim`: the other dims (merged where contiguous) locate a row.
template <size_t K>
struct RowGeometry {
  std::array<Operand, K> rest;    // the operands without `dim`
  std::array<int64_t, K> stride;  // along dim, in elements
  int64_t length = 0;             // elements along dim
  int64_t num_rows = 1;

  template <typename T>
  T* row(size_t k, int64_t j) const {
    return static_cast<T*>(rest[k].data) + element_offset(rest[k], j);
  }
  char* row_bytes(size_t k, int64_t j) const {
    return static_cast<char*>(rest[k].data) +
           element_offset(rest[k], j) * static_cast<int64_t>(element_size(rest[k].dtype));
  }
  bool same_dtype() const {
    for (size_t k = 1; k < K; ++k) {
      if (rest[k].dtype != rest[0].dtype) return false;
    }
    return true;
  }
  // dim is contiguous in every operand.
  bool rows_contiguous() const {
    for (size_t k = 0; k < K; ++k) {
      if (stride[k] != 1) return false;
    }
    return true;
  }
  // The innermost other dim is contiguous in every operand (and dim is not).
  bool columns_contiguous() const {
    const int n = rest[0].ndim;
    if (n == 0 || length <= 1) return false;
    for (size_t k = 0; k < K; ++k) {
      if (rest[k].strides[n - 1] != 1) return false;
    }
    return true;
  }
  bool parallel() const { return num_rows * length >= kParallelThreshold && !omp_in_parallel(); }
};

template <size_t K>
RowGeometry<K> make_rows(const std::array<const Operand*, K>& ops, int dim) {
  RowGeometry<K> g;
  std::array<Operand*, K> rest;
  for (size_t k = 0; k < K; ++k) {
    g.rest[k].data = ops[k]->data;
    g.rest[k].dtype = ops[k]->dtype;
    g.stride[k] = ops[k]->strides[dim];
    rest[k] = &g.rest[k];
  }
  g.length = ops[0]->sizes[dim];
  for (int d = 0; d < ops[0]->ndim; ++d) {
    if (d == dim) continue;
    std::array<int64_t, K> strides;
    for (size_t k = 0; k < K; ++k) strides[k] = ops[k]->strides[d];
    append_dim<K>(rest, ops[0]->sizes[d], strides);
    g.num_rows *= ops[0]->sizes[d];
  }
  return g;
}

template <typename T>
using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
template <typename T>
using ConstMap = Eigen::Map<const Array<T>>;
template <typename T>
using Map = Eigen::Map<Array<T>>;

// ---- rows: dim innermost and contiguous ----

template <typename T>
void softmax_row(const T* x, T* y, int64_t n, bool log) {
  const T top = lane_extreme<true, T>(x, n, extreme_identity<true, T>());
  double sum = 0.0;
  T buffer[kExpBlock];
  for (int64_t b = 0; b < n; b += kExpBlock) {
    const int64_t len = std::min(kExpBlock, n - b);
    Map<T> e(log ? buffer : y + b, len);  // log_softmax keeps x intact for the last pass
    e = (ConstMap<T>(x + b, len) - top).exp();
    sum += static_cast<double>(e.sum());
  }
  if (!log) {
    Map<T>(y, n) *= static_cast<T>(1.0 / sum);
  } else {
    const T shift = static_cast<T>(static_cast<double>(top) + std::log(sum));
    Map<T>(y, n) = ConstMap<T>(x, n) - shift;
  }
}

template <typename T>
void softmax_backward_row(T* gx, const T* g, const T* y, int64_t n, bool log) {
  double s = 0.0;
  for (int64_t b = 0; b < n; b += kExpBlock) {
    const int64_t len = std::min(kExpBlock, n - b);
    s += static_cast<double>(log ? ConstMap<T>(g + b, len).sum()
                                 : (ConstMap<T>(g + b, len) * ConstMap<T>(y + b, len)).sum());
  }
  const T st = static_cast<T>(s);
  if (!log) {
    Map<T>(gx, n) = ConstMap<T>(y, n) * (ConstMap<T>(g, n) - st);
  } else {
    Map<T>(gx, n) = ConstMap<T>(g, n) - ConstMap<T>(y, n).exp() * st;
  }
}

// ---- columns: up to kColumnWidth neighbouring rows at once ----

// x and y point at element 0 of the first row; the rows are contiguous with each other.
template <typename T>
void softmax_columns(const T* x, T* y, int64_t sx, int64_t sy, int64_t n, int64_t w, bool log) {
  T top[kColumnWidth], sum[kColumnWidth], buffer[kColumnWidth];
  for (int64_t c = 0; c < w; ++c) {
    top[c] = extreme_identity<true, T>();
    sum[c] = T(0);
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < w; ++c) top[c] = pick<true>(top[c], x[i * sx + c]);
  }
  Map<T> tops(top, w), sums(sum, w);
  for (int64_t i = 0; i < n; ++i) {
    Map<T> e(log ? buffer : y + i * sy, w);
    e = (ConstMap<T>(x + i * sx, w) - tops).exp();
    sums += e;
  }
  if (!log) {
    sums = sums.inverse();
    for (int64_t i = 0; i < n; ++i) Map<T>(y + i * sy, w) *= sums;
  } else {
    tops += sums.log();
    for (int64_t i = 0; i < n; ++i) Map<T>(y + i * sy, w) = ConstMap<T>(x + i * sx, w) - tops;
  }
}

template <typename T>
void softmax_backward_columns(T* gx, const T* g, const T* y, const std::array<int64_t, 3>& s,
                              int64_t n, int64_t w, bool log) {
  T sum[kColumnWidth];
  Map<T> sums(sum, w);
  sums.setZero();
  for (int64_t i = 0; i < n; ++i) {
    if (log) {
      sums += ConstMap<T>(g + i * s[1], w);
    } else {
      sums += ConstMap<T>(g + i * s[1], w) * ConstMap<T>(y + i * s[2], w);
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    Map<T> out(gx + i * s[0], w);
    const ConstMap<T> gi(g + i * s[1], w), yi(y + i * s[2], w);
    if (log) {
      out = gi - yi.exp() * sums;
    } else {
      out = yi * (gi - sums);
    }
  }
}

// Calls fn(j, c0, w) for every task: the rows j .. j + w - 1 of one block of neighbours.
template <size_t K, typename Fn>
void for_each_column_block(const RowGeometry<K>& g, Fn&& fn) {
  const int64_t width = g.rest[0].sizes[g.rest[0].ndim - 1];
  const int64_t blocks = (width + kColumnWidth - 1) / kColumnWidth;
  for_each_output(g.num_rows / width * blocks, g.parallel(), [&](int64_t t) {
    const int64_t c0 = (t % blocks) * kColumnWidth;
    fn(t / blocks * width + c0, std::min(kColumnWidth, width - c0));
  });
}

// ---- strided: any layout and dtype ----

template <typename C>
void softmax_strided(const RowGeometry<2>& g, bool log) {
  const DType out_dtype = g.rest[0].dtype, in_dtype = g.rest[1].dtype;
  const int64_t sy = g.stride[0] * static_cast<int64_t>(element_size(out_dtype));
  const int64_t sx = g.stride[1] * static_cast<int64_t>(element_size(in_dtype));
  const int64_t n = g.length;
  for_each_output(g.num_rows, g.parallel(), [&](int64_t j) {
    char* y = g.row_bytes(0, j);
    const char* x = g.row_bytes(1, j);
    C top = extreme_identity<true, C>();
    for (int64_t i = 0; i < n; ++i) top = pick<true>(top, load_as<C>(x + i * sx, in_dtype));
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(load_as<C>(x + i * sx, in_dtype) - top);
    const C inv = static_cast<C>(1.0 / sum);
    const C shift = static_cast<C>(static_cast<double>(top) + std::log(sum));
    for (int64_t i = 0; i < n; ++i) {
      const C v = softmax_value(log, load_as<C>(x + i * sx, in_dtype), top, shift, inv);
      store_as<C>(y + i * sy, out_dtype, v);
    }
  });
}

template <typename C>
void softmax_backward_strided(const RowGeometry<3>& g, bool log) {
  std::array<int64_t, 3> s;
  for (size_t k = 0; k < 3; ++k) {
    s[k] = g.stride[k] * static_cast<int64_t>(element_size(g.rest[k].dtype));
  }
  const DType dgx = g.rest[0].dtype, dg = g.rest[1].dtype, dy = g.rest[2].dtype;
  for_each_output(g.num_rows, g.parallel(), [&](int64_t j) {
    char* gx = g.row_bytes(0, j);
    const char* gr = g.row_bytes(1, j);
    const char* y = g.row_bytes(2, j);
    double acc = 0.0;
    for (int64_t i = 0; i < g.length; ++i) {
      acc += softmax_grad_term(log, load_as<double>(gr + i * s[1], dg),
                               load_as<double>(y + i * s[2], dy));
    }
    const C sum = static_cast<C>(acc);
    for (int64_t i = 0; i < g.length; ++i) {
      const C gi = load_as<C>(gr + i * s[1], dg), yi = load_as<C>(y + i * s[2], dy);
      store_as<C>(gx + i * s[0], dgx, softmax_grad_value(log, gi, yi, sum));
    }
  });
}

// float64 if any operand is float64, float32 otherwise (float16 computes in float).
template <size_t K>
bool needs_double(const RowGeometry<K>& g) {
  for (size_t k = 0; k < K; ++k) {
    if (g.rest[k].dtype == DType::Float64) return true;
  }
  return false;
}

}  // namespace

// ---- entry points ----

void CpuBackend::softmax(const Operand& out, const Operand& in, int dim, bool log) {
  const RowGeometry<2> g = make_rows<2>({&out, &in}, dim);
  if (g.length == 0 || g.num_rows == 0) return;
  const DType dt = in.dtype;
  if (g.same_dtype() && (dt == DType::Float32 || dt == DType::Float64)) {
    const bool rows = g.rows_contiguous() || g.length == 1;
    if (rows || g.columns_contiguous()) {
      dispatch_floating(dt, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!is_reduced_v<T>) {
          if (rows) {
            for_each_output(g.num_rows, g.parallel(), [&](int64_t j) {
              softmax_row<T>(g.row<T>(1, j), g.row<T>(0, j), g.length, log);
            });
          } else {
            for_each_column_block(g, [&](int64_t j, int64_t w) {
              softmax_columns<T>(g.row<T>(1, j), g.row<T>(0, j), g.stride[1], g.stride[0], g.length,
                                 w, log);
            });
          }
        }
      });
      return;
    }
  }
  if (needs_double(g)) {
    softmax_strided<double>(g, log);
  } else {
    softmax_strided<float>(g, log);
  }
}

void CpuBackend::softmax_backward(const Operand& grad_in, const Operand& grad_out,
                                  const Operand& out, int dim, bool log) {
  const RowGeometry<3> g = make_rows<3>({&grad_in, &grad_out, &out}, dim);
  if (g.length == 0 || g.num_rows == 0) return;
  const DType dt = grad_in.dtype;
  if (g.same_dtype() && (dt == DType::Float32 || dt == DType::Float64)) {
    const bool rows = g.rows_contiguous() || g.length == 1;
    if (rows || g.columns_contiguous()) {
      dispatch_floating(dt, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!is_reduced_v<T>) {
          if (rows) {
            for_each_output(g.num_rows, g.parallel(), [&](int64_t j) {
              softmax_backward_row<T>(g.row<T>(0, j), g.row<T>(1, j), g.row<T>(2, j), g.length,
                                      log);
            });
          } else {
            for_each_column_block(g, [&](int64_t j, int64_t w) {
              softmax_backward_columns<T>(g.row<T>(0, j), g.row<T>(1, j), g.row<T>(2, j), g.stride,
                                          g.length, w, log);
            });
          }
        }
      });
      return;
    }
  }
  if (needs_double(g)) {
    softmax_backward_strided<double>(g, log);
  } else {
    softmax_backward_strided<float>(g, log);
  }
}

}  // namespace memgrad::kernels::cpu
