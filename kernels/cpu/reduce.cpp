// CPU reduction kernels: sum, mean, prod, max, min, any, all, var/std, max/min with indices,
// logsumexp and norms, over any set of dims of any strided input.
//
// Each call builds a ReducePlan (reduce_util.h) and picks one of three paths:
//   rows     the innermost reduced dim is contiguous (row reductions, full reductions of a
//            contiguous tensor): a vectorised fold per row; whole outputs per thread, or one
//            long reduction split into fixed-size chunks merged in order;
//   columns  the innermost kept dim is contiguous in input and output and the reduced dims are
//            outer (bias gradients, (B, C) -> (C)): accumulators for up to kColumnWidth outputs
//            are updated by every reduced row, vectorised along the kept dim;
//   strided  anything else: the same per-output fold over strided rows.
// Accumulation: floating sums (float16/32/64) in double lanes, per-block totals in double;
// integer and bool sums in int64; max/min in the compute type (float for float16). Results
// are stored converted to the output's dtype.
// Nothing is allocated from the device allocators; the work split never depends on the number
// of threads, so results are reproducible. The folds' identities and combines, norm terms and
// var's arithmetic are kernels/reduce_formulas.h, shared with the CUDA backend.
#include "kernels/cpu/cpu_backend.h"

#include <cmath>
#include <memory>

#include "kernels/cpu/element_types.h"
#include "kernels/cpu/reduce_util.h"
#include "kernels/cpu/strided_iter.h"
#include "kernels/reduce_formulas.h"

namespace memgrad::kernels::cpu {
namespace {

// Kept-dim outputs one column task accumulates at once: each reduced row is read in segments
// of up to 8 KiB (float32), long enough for the hardware prefetcher.
constexpr int64_t kColumnWidth = 2048;
// Column tasks from which threads take whole tasks instead of splitting the reduced rows.
constexpr int64_t kMinColumnTasks = 8;
// Most row chunks one column task is split into (bounds the partial buffers).
constexpr int64_t kMaxRowChunks = 32;

// ---- folds: sum, prod, max, min, any, all ----

// What a fold accumulates in, how it converts one element and combines two partial results.
template <Fold F, typename T>
struct FoldOp {
  using C = compute_t<T>;
  static constexpr bool kFloating = std::is_floating_point_v<C>;
  using A = std::conditional_t<F == Fold::Any || F == Fold::All, bool,
                               std::conditional_t<F == Fold::Max || F == Fold::Min, C,
                                                  std::conditional_t<kFloating, double, int64_t>>>;

  static A init() { return fold_identity<F, A>(); }
  static A convert(T x) {
    if constexpr (F == Fold::Any || F == Fold::All) {
      return to_acc<C>(x) != C(0);
    } else {
      return to_acc<A>(x);
    }
  }
  static A combine(A a, A b) { return fold_combine<F>(a, b); }
  // The fold of a contiguous row.
  static A contiguous(const T* p, int64_t n) {
    if constexpr (F == Fold::Sum && kFloating) {
      // Double lanes even for float: 16M floats sum to ~1e-15 relative, and the loop stays
      // bound by memory bandwidth rather than by the conversions.
      return lane_sum<double>(p, n, [](double x) { return x; });
    } else if constexpr (F == Fold::Max || F == Fold::Min) {
      return lane_extreme<F == Fold::Max, A>(p, n, init());
    } else if constexpr (F == Fold::Any) {
      for (int64_t i = 0; i < n; ++i) {
        if (convert(p[i])) return true;
      }
      return false;
    } else if constexpr (F == Fold::All) {
      for (int64_t i = 0; i < n; ++i) {
        if (!convert(p[i])) return false;
      }
      return true;
    } else {
      A acc = init();
      for (int64_t i = 0; i < n; ++i) acc = combine(acc, convert(p[i]));
      return acc;
    }
  }
};

// A fold as an accumulator for reduce_range.
template <Fold F, typename T>
struct FoldAcc {
  using Op = FoldOp<F, T>;
  typename Op::A value = Op::init();

  void row(const char* p, int64_t stride, int64_t n) {
    if (stride == static_cast<int64_t>(sizeof(T))) {
      value = Op::combine(value, Op::contiguous(reinterpret_cast<const T*>(p), n));
      return;
    }
    for (int64_t i = 0; i < n; ++i)
      value = Op::combine(value, Op::convert(load<T>(p + i * stride)));
  }
  void merge(const FoldAcc& other) { value = Op::combine(value, other.value); }
};

// Folds every output of `plan` along its reduced dims and stores finish(value).
template <Fold F, typename T, typename Finish>
void fold_rows(const ReducePlan& plan, DType out_dtype, Finish finish) {
  using A = typename FoldOp<F, T>::A;
  const ReduceSchedule sched = schedule_for(plan.num_outputs, plan.reduce_numel);
  for_each_output(plan.num_outputs, sched.outputs_parallel, [&](int64_t j) {
    const A v = reduce_range(plan.red, plan.input_of(j), FoldAcc<F, T>{}, sched.chunked).value;
    store_as(plan.output_of(j), out_dtype, finish(v));
  });
}

// Folds the reduced rows [r0, r1) into acc[0, w): columns c0..c0+w of the kept dim.
template <Fold F, typename T>
void fold_columns(const ReducePlan& plan, const char* base, int64_t r0, int64_t r1, int64_t w,
                  typename FoldOp<F, T>::A* acc) {
  using Op = FoldOp<F, T>;
  for (int64_t c = 0; c < w; ++c) acc[c] = Op::init();
  const LoopNest<1> nest = LoopNest<1>::make({&plan.red});
  nest.run({const_cast<char*>(base)}, r0, r1, [&](auto p, auto s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const T* row = reinterpret_cast<const T*>(p[0] + i * s[0]);
      for (int64_t c = 0; c < w; ++c) acc[c] = Op::combine(acc[c], Op::convert(row[c]));
    }
  });
}

// Merges per-chunk partial columns (parts[k * w + c]) in chunk order into acc[0, w).
template <Fold F, typename T>
void merge_columns(const typename FoldOp<F, T>::A* parts, int64_t num_chunks, int64_t w,
                   typename FoldOp<F, T>::A* acc) {
  using Op = FoldOp<F, T>;
  for (int64_t c = 0; c < w; ++c) acc[c] = Op::init();
  for (int64_t k = 0; k < num_chunks; ++k) {
    for (int64_t c = 0; c < w; ++c) acc[c] = Op::combine(acc[c], parts[k * w + c]);
  }
}

// The column path: tasks of (outer position, block of kColumnWidth kept columns). Many tasks:
// threads take whole tasks. Few tasks over many rows: each task's rows are cut into at most
// kMaxRowChunks chunks (sizes fixed by the shape) folded on all threads, merged in chunk order.
template <Fold F, typename T, typename Finish>
void fold_column_tasks(const ReducePlan& plan, DType out_dtype, Finish finish) {
  using A = typename FoldOp<F, T>::A;
  const int64_t width = plan.kept_in.sizes[plan.kept_in.ndim - 1];
  const int64_t blocks = (width + kColumnWidth - 1) / kColumnWidth;
  const int64_t tasks = plan.num_outputs / width * blocks;
  const int64_t rows = plan.reduce_numel;
  const int64_t out_es = static_cast<int64_t>(element_size(out_dtype));
  const bool parallel = plan.num_outputs * rows >= kParallelThreshold && !omp_in_parallel();
  const bool split_rows = parallel && tasks < kMinColumnTasks && rows > 1;
  // Not std::vector: A may be bool.
  const std::unique_ptr<A[]> acc(new A[static_cast<size_t>(std::min(width, kColumnWidth))]);
  for_each_output(tasks, parallel && !split_rows, [&](int64_t t) {
    const int64_t c0 = (t % blocks) * kColumnWidth;
    const int64_t w = std::min(kColumnWidth, width - c0);
    const int64_t j = t / blocks * width + c0;  // the task's first output
    A* out_acc = acc.get();
    std::unique_ptr<A[]> own;
    if (parallel && !split_rows) {
      own.reset(new A[static_cast<size_t>(w)]);  // one buffer per concurrent task
      out_acc = own.get();
    }
    if (!split_rows) {
      fold_columns<F, T>(plan, plan.input_of(j), 0, rows, w, out_acc);
    } else {
      const int64_t chunk =
          std::max({int64_t{1}, kReduceChunk / w, (rows + kMaxRowChunks - 1) / kMaxRowChunks});
      const int64_t num_chunks = (rows + chunk - 1) / chunk;
      const std::unique_ptr<A[]> parts(new A[static_cast<size_t>(num_chunks * w)]);
#pragma omp parallel for schedule(static)
      for (int64_t k = 0; k < num_chunks; ++k) {
        fold_columns<F, T>(plan, plan.input_of(j), k * chunk, std::min(rows, (k + 1) * chunk), w,
                           parts.get() + k * w);
      }
      merge_columns<F, T>(parts.get(), num_chunks, w, out_acc);
    }
    char* out = plan.output_of(j);
    for (int64_t c = 0; c < w; ++c) store_as(out + c * out_es, out_dtype, finish(out_acc[c]));
  });
}

// Whether the kept dims end in a dim contiguous in input and output while the reduced rows are
// strided: then the column path reads memory in order.
bool columns_apply(const ReducePlan& plan) {
  const int k = plan.kept_in.ndim;
  return k > 0 && plan.num_outputs > 0 && plan.red.ndim > 0 && plan.reduce_numel > 1 &&
         plan.kept_in.strides[k - 1] == 1 && plan.kept_out.strides[k - 1] == 1 &&
         plan.red.strides[plan.red.ndim - 1] != 1;
}

template <Fold F, typename T, typename Finish>
void run_fold(const ReducePlan& plan, DType out_dtype, Finish finish) {
  if (columns_apply(plan)) {
    fold_column_tasks<F, T>(plan, out_dtype, finish);
  } else {
    fold_rows<F, T>(plan, out_dtype, finish);
  }
}

// ---- two-pass and transformed sums: var, logsumexp, norm ----

// Sum of (x - mean)^2, in double.
template <typename T>
struct SquaredDeviationAcc {
  double mean = 0.0;
  double value = 0.0;

  void row(const char* p, int64_t stride, int64_t n) {
    const double m = mean;
    if (stride == static_cast<int64_t>(sizeof(T))) {
      value += lane_sum<double>(reinterpret_cast<const T*>(p), n,
                                [m](double x) { return squared_deviation(x, m); });
      return;
    }
    for (int64_t i = 0; i < n; ++i)
      value += squared_deviation(to_acc<double>(load<T>(p + i * stride)), m);
  }
  void merge(const SquaredDeviationAcc& other) { value += other.value; }
};

// Sum of exp(x - shift); float rows use Eigen's vectorised exp per block, blocks in double.
template <typename T>
struct ExpSumAcc {
  double shift = 0.0;
  double value = 0.0;

  void row(const char* p, int64_t stride, int64_t n) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if (stride == static_cast<int64_t>(sizeof(T))) {
        using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
        constexpr int64_t kBlock = 1024;
        const T* q = reinterpret_cast<const T*>(p);
        T buffer[kBlock];
        for (int64_t b = 0; b < n; b += kBlock) {
          const int64_t m = std::min(kBlock, n - b);
          Eigen::Map<Array> e(buffer, m);
          e = (Eigen::Map<const Array>(q + b, m) - static_cast<T>(shift)).exp();
          value += static_cast<double>(e.sum());
        }
        return;
      }
    }
    for (int64_t i = 0; i < n; ++i)
      value += std::exp(to_acc<double>(load<T>(p + i * stride)) - shift);
  }
  void merge(const ExpSumAcc& other) { value += other.value; }
};

// sum |x|^p (count of non-zeros for p = 0, max/min |x| for +-inf), in double.
template <typename T>
struct NormAcc {
  NormKind kind = NormKind::Two;
  double p = 2.0;
  double value = 0.0;

  void row(const char* p_row, int64_t stride, int64_t n) {
    const bool contiguous = stride == static_cast<int64_t>(sizeof(T));
    const T* q = reinterpret_cast<const T*>(p_row);
    if (kind == NormKind::Inf || kind == NormKind::NegInf) {
      for (int64_t i = 0; i < n; ++i) {
        const double a = norm_term(kind, p, to_acc<double>(load<T>(p_row + i * stride)));
        value = norm_combine(kind, value, a);
      }
    } else if (contiguous && kind == NormKind::Two) {
      value += lane_sum<double>(q, n, [](double x) { return norm_term(NormKind::Two, 2.0, x); });
    } else if (contiguous && kind == NormKind::One) {
      value += lane_sum<double>(q, n, [](double x) { return norm_term(NormKind::One, 1.0, x); });
    } else {
      for (int64_t i = 0; i < n; ++i)
        value += norm_term(kind, p, to_acc<double>(load<T>(p_row + i * stride)));
    }
  }
  void merge(const NormAcc& other) { value = norm_combine(kind, value, other.value); }
  double finish() const { return norm_finish(kind, p, value); }
};

// ---- max/min with indices along one dim ----

template <typename C>
struct ArgBest {
  C value;
  int64_t index;
};

// Whether x displaces the current best: strictly better, or the first NaN (PyTorch's max/min
// return the first NaN). Ties keep the earlier index.
template <bool kIsMax, typename C>
bool beats(C x, C best) {
  if (best != best) return false;
  if (x != x) return true;
  return kIsMax ? x > best : x < best;
}

// Scans elements [begin, end) of a row (stride in bytes). Contiguous rows take two vectorised
// passes: the extreme value, then the first index holding it.
template <bool kIsMax, typename T>
ArgBest<compute_t<T>> arg_scan(const char* p, int64_t stride, int64_t begin, int64_t end) {
  using C = compute_t<T>;
  if (stride == static_cast<int64_t>(sizeof(T))) {
    const T* q = reinterpret_cast<const T*>(p);
    const C best = lane_extreme<kIsMax, C>(q + begin, end - begin, extreme_identity<kIsMax, C>());
    const bool nan = best != best;
    int64_t i = begin;
    if (!nan) {
      // Skip blocks without the value with a vectorised test, then find it one by one.
      constexpr int64_t kBlock = 32;
      for (; i + kBlock <= end; i += kBlock) {
        bool found = false;
        for (int64_t l = 0; l < kBlock; ++l) found |= to_acc<C>(q[i + l]) == best;
        if (found) break;
      }
    }
    for (; i < end; ++i) {
      const C x = to_acc<C>(q[i]);
      if (x == best || (nan && x != x)) return {x, i};
    }
  }
  ArgBest<C> best{to_acc<C>(load<T>(p + begin * stride)), begin};
  for (int64_t i = begin + 1; i < end; ++i) {
    const C x = to_acc<C>(load<T>(p + i * stride));
    if (beats<kIsMax>(x, best.value)) best = {x, i};
  }
  return best;
}

template <bool kIsMax, typename T>
ArgBest<compute_t<T>> arg_row(const char* p, int64_t stride, int64_t n, bool chunked) {
  using C = compute_t<T>;
  if (!chunked || n <= kReduceChunk) return arg_scan<kIsMax, T>(p, stride, 0, n);
  const int64_t num_chunks = (n + kReduceChunk - 1) / kReduceChunk;
  std::vector<ArgBest<C>> parts(static_cast<size_t>(num_chunks));
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < num_chunks; ++c) {
    parts[static_cast<size_t>(c)] =
        arg_scan<kIsMax, T>(p, stride, c * kReduceChunk, std::min(n, (c + 1) * kReduceChunk));
  }
  ArgBest<C> best = parts[0];
  for (const ArgBest<C>& part : parts) {
    if (beats<kIsMax>(part.value, best.value)) best = part;
  }
  return best;
}

template <bool kIsMax, typename T>
void arg_reduce_typed(const Operand& values, const Operand& indices, const Operand& in) {
  const ReducePlan plan = make_reduce_plan(indices, in);
  const int64_t n = plan.reduce_numel;
  if (n == 0) return;  // the engine rejects empty reductions
  const int64_t stride = plan.inner_red_stride();
  // `values` has the same sizes as `indices`; its own strides locate each output.
  Operand kept_values;
  kept_values.data = values.data;
  kept_values.dtype = values.dtype;
  for (int d = 0; d < in.ndim; ++d) {
    if (indices.sizes[d] == 1 && in.sizes[d] != 1) continue;
    append_dim<1>({&kept_values}, in.sizes[d], {values.strides[d]});
  }
  const int64_t values_es = static_cast<int64_t>(element_size(values.dtype));
  const ReduceSchedule sched = schedule_for(plan.num_outputs, n);
  for_each_output(plan.num_outputs, sched.outputs_parallel, [&](int64_t j) {
    const auto best = arg_row<kIsMax, T>(plan.input_of(j), stride, n, sched.chunked);
    store_as<int64_t>(plan.output_of(j), DType::Int64, best.index);
    if (values.data != nullptr) {
      char* v = static_cast<char*>(values.data) + element_offset(kept_values, j) * values_es;
      store_as(v, values.dtype, best.value);
    }
  });
}

}  // namespace

// ---- entry points ----

void CpuBackend::reduce(ReduceOp op, const Operand& out, const Operand& in) {
  const ReducePlan plan = make_reduce_plan(out, in);
  const double n = static_cast<double>(plan.reduce_numel);
  auto same = [](auto v) { return v; };
  dispatch_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
      case ReduceOp::Sum: return run_fold<Fold::Sum, T>(plan, out.dtype, same);
      case ReduceOp::Mean:
        return run_fold<Fold::Sum, T>(plan, out.dtype,
                                      [n](auto v) { return static_cast<double>(v) / n; });
      case ReduceOp::Prod: return run_fold<Fold::Prod, T>(plan, out.dtype, same);
      case ReduceOp::Max: return run_fold<Fold::Max, T>(plan, out.dtype, same);
      case ReduceOp::Min: return run_fold<Fold::Min, T>(plan, out.dtype, same);
      case ReduceOp::Any: return run_fold<Fold::Any, T>(plan, out.dtype, same);
      case ReduceOp::All: return run_fold<Fold::All, T>(plan, out.dtype, same);
    }
  });
}

void CpuBackend::var(const Operand& out, const Operand& in, int64_t correction, bool take_sqrt) {
  const ReducePlan plan = make_reduce_plan(out, in);
  const int64_t n = plan.reduce_numel;
  const double divisor = var_divisor(n, correction);
  const ReduceSchedule sched = schedule_for(plan.num_outputs, n);
  dispatch_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    for_each_output(plan.num_outputs, sched.outputs_parallel, [&](int64_t j) {
      const char* base = plan.input_of(j);
      const auto sum = reduce_range(plan.red, base, FoldAcc<Fold::Sum, T>{}, sched.chunked).value;
      SquaredDeviationAcc<T> dev;
      dev.mean = static_cast<double>(sum) / static_cast<double>(n);
      const double ss = reduce_range(plan.red, base, dev, sched.chunked).value;
      store_as(plan.output_of(j), out.dtype, var_finish(ss, divisor, take_sqrt));
    });
  });
}

void CpuBackend::arg_reduce(bool is_max, const Operand& values, const Operand& indices,
                            const Operand& in, int /*dim*/) {
  // The reduced dim is the one where `indices` has size 1 and `in` does not.
  dispatch_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (is_max) {
      arg_reduce_typed<true, T>(values, indices, in);
    } else {
      arg_reduce_typed<false, T>(values, indices, in);
    }
  });
}

void CpuBackend::logsumexp(const Operand& out, const Operand& in) {
  const ReducePlan plan = make_reduce_plan(out, in);
  const ReduceSchedule sched = schedule_for(plan.num_outputs, plan.reduce_numel);
  dispatch_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    for_each_output(plan.num_outputs, sched.outputs_parallel, [&](int64_t j) {
      const char* base = plan.input_of(j);
      const auto top = reduce_range(plan.red, base, FoldAcc<Fold::Max, T>{}, sched.chunked).value;
      double result = static_cast<double>(top);
      // All -inf (or empty) gives -inf, a +inf gives +inf, a NaN gives NaN: no shift to apply.
      if (std::isfinite(result)) {
        ExpSumAcc<T> acc;
        acc.shift = result;
        result += std::log(reduce_range(plan.red, base, acc, sched.chunked).value);
      }
      store_as(plan.output_of(j), out.dtype, result);
    });
  });
}

void CpuBackend::norm(const Operand& out, const Operand& in, double p) {
  const ReducePlan plan = make_reduce_plan(out, in);
  const ReduceSchedule sched = schedule_for(plan.num_outputs, plan.reduce_numel);
  dispatch_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    NormAcc<T> init;
    init.kind = norm_kind(p);
    init.p = p;
    init.value = norm_identity(init.kind);
    for_each_output(plan.num_outputs, sched.outputs_parallel, [&](int64_t j) {
      const NormAcc<T> acc = reduce_range(plan.red, plan.input_of(j), init, sched.chunked);
      store_as(plan.output_of(j), out.dtype, acc.finish());
    });
  });
}

}  // namespace memgrad::kernels::cpu
