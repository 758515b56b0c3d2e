// CUDA against CPU, kernel family by kernel family: elementwise (every unary and binary op,
// backward rules, scalars, clamp, where; contiguous, transposed, broadcast and mixed-dtype
// operands), copy and fill across every dtype pair, reductions (every op, the three thread
// layouts, var, arg max/min with ties and NaN, logsumexp, norms), softmax and its backward
// (warp and block paths, along the last and a leading dim), and GEMM (float32/64, float16,
// bfloat16, transposes, batches, k = 0, the layout error). Tolerances are stated per case: exact
// where both sides round the same operations, a few ulp of the dtype where transcendental functions
// or summation orders differ (rtol_for in cuda_twin.h).
#include <doctest/doctest.h>

#include <limits>

#ifndef MEMGRAD_CUDA_TWIN_ON_CPU
#include "kernels/cuda/cublas_api.h"
#endif
#include "tests/cuda/cuda_twin.h"

using namespace memgrad;
using namespace memgrad::testing;
using kernels::BinaryOp;
using kernels::ReduceOp;
using kernels::UnaryOp;

namespace {

constexpr UnaryOp kUnaryOps[] = {
    UnaryOp::Neg,     UnaryOp::Exp,        UnaryOp::Log,      UnaryOp::Sqrt,
    UnaryOp::Rsqrt,   UnaryOp::Abs,        UnaryOp::Sign,     UnaryOp::Tanh,
    UnaryOp::Sigmoid, UnaryOp::Relu,       UnaryOp::GeluTanh, UnaryOp::GeluErf,
    UnaryOp::Silu,    UnaryOp::Reciprocal, UnaryOp::Square,   UnaryOp::LogicalNot};

constexpr BinaryOp kBinaryOps[] = {
    BinaryOp::Add,     BinaryOp::Sub,     BinaryOp::Mul, BinaryOp::Div,        BinaryOp::Pow,
    BinaryOp::Maximum, BinaryOp::Minimum, BinaryOp::Eq,  BinaryOp::Ne,         BinaryOp::Lt,
    BinaryOp::Le,      BinaryOp::Gt,      BinaryOp::Ge,  BinaryOp::LogicalAnd, BinaryOp::LogicalOr};

bool needs_positive(UnaryOp op) {
  return op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt;
}

// A (rows x cols) input and its transpose view (a strided operand).
Twin input(int64_t rows, int64_t cols, DType dtype, double lo, double hi, uint64_t seed) {
  return twin(random_tensor({rows, cols}, dtype, lo, hi, seed));
}

}  // namespace

TEST_SUITE("cuda") {

TEST_CASE("every unary op matches the CPU on contiguous and transposed inputs") {
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    for (UnaryOp op : kUnaryOps) {
      for (bool transposed : {false, true}) {
        CAPTURE(dtype_name(dtype));
        CAPTURE(static_cast<int>(op));
        CAPTURE(transposed);
        const double lo = needs_positive(op) ? 0.1 : -3.0;
        Twin in = input(37, 53, dtype, lo, 3.0, 11);
        if (transposed) in = {in.cpu.t(), in.gpu.t()};
        Twin out = output_twin(in.cpu.sizes(), dtype);
        cpu_kernels().unary(op, arg(out.cpu), arg(in.cpu));
        cuda_kernels().unary(op, arg(out.gpu), arg(in.gpu));
        check_close(out, rtol_for(dtype), rtol_for(dtype) * 1e-2, "unary");
      }
    }
  }
}

TEST_CASE("unary ops on int64 and bool compute in the CPU's types") {
  const Twin ints = twin(random_tensor({1000}, kInt64, -50, 50, 3));
  for (UnaryOp op : {UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Sign, UnaryOp::Relu, UnaryOp::Square}) {
    CAPTURE(static_cast<int>(op));
    Twin out = output_twin({1000}, kInt64);
    cpu_kernels().unary(op, arg(out.cpu), arg(ints.cpu));
    cuda_kernels().unary(op, arg(out.gpu), arg(ints.gpu));
    check_equal(out, "int64 unary");
  }
  // exp of an int64 tensor into float32: computed in float, as on the CPU.
  Twin e = output_twin({1000}, kFloat32);
  const Twin small = twin(random_tensor({1000}, kInt64, -5, 5, 4));
  cpu_kernels().unary(UnaryOp::Exp, arg(e.cpu), arg(small.cpu));
  cuda_kernels().unary(UnaryOp::Exp, arg(e.gpu), arg(small.gpu));
  check_close(e, 2e-6, 0.0, "exp int64 -> float32");
  const Twin flags = twin(random_tensor({257}, kBool));
  Twin negated = output_twin({257}, kBool);
  cpu_kernels().unary(UnaryOp::LogicalNot, arg(negated.cpu), arg(flags.cpu));
  cuda_kernels().unary(UnaryOp::LogicalNot, arg(negated.gpu), arg(flags.gpu));
  check_equal(negated, "logical_not bool");
}

TEST_CASE("every unary backward rule matches the CPU") {
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    for (UnaryOp op : kUnaryOps) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(static_cast<int>(op));
      const Twin g = input(64, 33, dtype, -1.0, 1.0, 21);
      const Twin s = input(64, 33, dtype, needs_positive(op) ? 0.2 : -2.0, 2.0, 22);
      Twin out = output_twin({64, 33}, dtype);
      cpu_kernels().unary_backward(op, arg(out.cpu), arg(g.cpu), arg(s.cpu));
      cuda_kernels().unary_backward(op, arg(out.gpu), arg(g.gpu), arg(s.gpu));
      check_close(out, rtol_for(dtype), rtol_for(dtype) * 1e-2, "unary_backward");
    }
  }
}

TEST_CASE("every binary op matches the CPU, with a broadcast operand and mixed dtypes") {
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64}) {
    for (BinaryOp op : kBinaryOps) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(static_cast<int>(op));
      const bool is_pow = op == BinaryOp::Pow;
      const Twin a = input(40, 70, dtype, is_pow ? 0.5 : -9.0, is_pow ? 2.0 : 9.0, 31);
      // b: one row, broadcast down the 40 rows (stride 0), with zeros for the int64 Div rule
      // (and no negative int64 exponents: 0^-n would overflow int64, undefined on the CPU).
      const double b_lo = is_pow ? (dtype == kInt64 ? 0.0 : -2.0) : -4.0;
      const Twin row = twin(random_tensor({1, 70}, dtype, b_lo, 4.0, 32));
      const Twin b{row.cpu.expand({40, 70}), row.gpu.expand({40, 70})};
      const DType out_dtype = kernels::is_comparison(op) ? kBool : dtype;
      Twin out = output_twin({40, 70}, out_dtype);
      const double alpha = op == BinaryOp::Add || op == BinaryOp::Sub ? 2.0 : 1.0;
      cpu_kernels().binary(op, arg(out.cpu), arg(a.cpu), arg(b.cpu), alpha);
      cuda_kernels().binary(op, arg(out.gpu), arg(a.gpu), arg(b.gpu), alpha);
      // Pow goes through pow(); everything else rounds exactly as on the CPU.
      check_close(out, is_pow ? rtol_for(dtype) : 0.0, 0.0, "binary");
    }
  }
  // float32 + float64 into float64, int64 * float32 into float32: computed in the output's type.
  const Twin f = input(30, 30, kFloat32, -5, 5, 41);
  const Twin d = input(30, 30, kFloat64, -5, 5, 42);
  const Twin i = input(30, 30, kInt64, -5, 5, 43);
  Twin sum = output_twin({30, 30}, kFloat64);
  cpu_kernels().binary(BinaryOp::Add, arg(sum.cpu), arg(f.cpu), arg(d.cpu), 1.0);
  cuda_kernels().binary(BinaryOp::Add, arg(sum.gpu), arg(f.gpu), arg(d.gpu), 1.0);
  check_equal(sum, "float32 + float64");
  Twin prod = output_twin({30, 30}, kFloat32);
  cpu_kernels().binary(BinaryOp::Mul, arg(prod.cpu), arg(i.cpu), arg(f.cpu), 1.0);
  cuda_kernels().binary(BinaryOp::Mul, arg(prod.gpu), arg(i.gpu), arg(f.gpu), 1.0);
  check_equal(prod, "int64 * float32");
}

TEST_CASE("binary_scalar rounds the scalar as the CPU stores it") {
  struct Case {
    DType dtype;
    BinaryOp op;
    double scalar;
    bool first;
  };
  const Case cases[] = {
      {kFloat32, BinaryOp::Mul, 0.1, false}, {kFloat16, BinaryOp::Add, 0.1, false},
      {kFloat64, BinaryOp::Div, 3.0, true},  {kInt64, BinaryOp::Sub, 7.0, true},
      {kInt64, BinaryOp::Lt, 2.5, false},    {kFloat16, BinaryOp::Ge, 0.3, false},
      {kInt64, BinaryOp::Div, 0.0, false}};
  for (const Case& c : cases) {
    CAPTURE(dtype_name(c.dtype));
    CAPTURE(static_cast<int>(c.op));
    const Twin a = input(33, 17, c.dtype, -5, 5, 51);
    Twin out = output_twin({33, 17}, kernels::is_comparison(c.op) ? kBool : c.dtype);
    cpu_kernels().binary_scalar(c.op, arg(out.cpu), arg(a.cpu), c.scalar, c.first);
    cuda_kernels().binary_scalar(c.op, arg(out.gpu), arg(a.gpu), c.scalar, c.first);
    check_equal(out, "binary_scalar");
  }
}

TEST_CASE("pow_scalar_backward, clamp, clamp_backward and where match the CPU") {
  for (DType dtype : {kFloat32, kFloat16, kFloat64}) {
    CAPTURE(dtype_name(dtype));
    const Twin x = input(50, 20, dtype, 0.1, 3.0, 61);
    const Twin g = input(50, 20, dtype, -1.0, 1.0, 62);
    Twin pg = output_twin({50, 20}, dtype);
    cpu_kernels().pow_scalar_backward(arg(pg.cpu), arg(g.cpu), arg(x.cpu), 2.5);
    cuda_kernels().pow_scalar_backward(arg(pg.gpu), arg(g.gpu), arg(x.gpu), 2.5);
    check_close(pg, rtol_for(dtype), 0.0, "pow_scalar_backward");
    Twin c = output_twin({50, 20}, dtype);
    cpu_kernels().clamp(arg(c.cpu), arg(x.cpu), 0.5, 2.0, true, true);
    cuda_kernels().clamp(arg(c.gpu), arg(x.gpu), 0.5, 2.0, true, true);
    check_equal(c, "clamp");
    Twin cg = output_twin({50, 20}, dtype);
    cpu_kernels().clamp_backward(arg(cg.cpu), arg(g.cpu), arg(x.cpu), 0.5, 2.0, true, false);
    cuda_kernels().clamp_backward(arg(cg.gpu), arg(g.gpu), arg(x.gpu), 0.5, 2.0, true, false);
    check_equal(cg, "clamp_backward");
    const Twin cond = twin(random_tensor({50, 1}, kBool, 0, 1, 63));
    const Twin cond_b{cond.cpu.expand({50, 20}), cond.gpu.expand({50, 20})};
    Twin w = output_twin({50, 20}, dtype);
    cpu_kernels().where(arg(w.cpu), arg(cond_b.cpu), arg(x.cpu), arg(g.cpu.t().contiguous().t()));
    cuda_kernels().where(arg(w.gpu), arg(cond_b.gpu), arg(x.gpu), arg(g.gpu.t().contiguous().t()));
    check_equal(w, "where");
  }
  // clamp keeps NaN.
  const Twin nan = twin(tensor({std::numeric_limits<double>::quiet_NaN(), 5.0, -5.0}));
  Twin c = output_twin({3}, kFloat32);
  cpu_kernels().clamp(arg(c.cpu), arg(nan.cpu), -1.0, 1.0, true, true);
  cuda_kernels().clamp(arg(c.gpu), arg(nan.gpu), -1.0, 1.0, true, true);
  check_equal(c, "clamp with NaN");
}

TEST_CASE("copy converts between every pair of dtypes from strided and broadcast sources") {
  for (DType from : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kBool}) {
    for (DType to : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kBool}) {
      CAPTURE(dtype_name(from));
      CAPTURE(dtype_name(to));
      // Within float16's range: inf -> int64 is undefined behaviour on the CPU.
      const Twin src = input(45, 31, from, -60000, 60000, 71);
      Twin dst = output_twin({31, 45}, to);
      cpu_kernels().copy(arg(dst.cpu), arg(src.cpu.t()));
      cuda_kernels().copy(arg(dst.gpu), arg(src.gpu.t()));
      check_equal(dst, "copy transposed");
      const Twin col{src.cpu.slice(1, 0, 1), src.gpu.slice(1, 0, 1)};  // (45, 1)
      Twin wide = output_twin({45, 8}, to);
      cpu_kernels().copy(arg(wide.cpu), arg(col.cpu.expand({45, 8})));
      cuda_kernels().copy(arg(wide.gpu), arg(col.gpu.expand({45, 8})));
      check_equal(wide, "copy broadcast");
    }
  }
}

TEST_CASE("fill writes every element of strided views in the CPU's rounding") {
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kBool}) {
    CAPTURE(dtype_name(dtype));
    Twin t = output_twin({20, 30}, dtype, 1.0);
    const Twin every_other{t.cpu.slice(1, 0, 30, 2), t.gpu.slice(1, 0, 30, 2)};
    cpu_kernels().fill(arg(every_other.cpu), 0.1);
    cuda_kernels().fill(arg(every_other.gpu), 0.1);
    check_equal(t, "fill strided");
    cpu_kernels().fill(arg(t.cpu), 0.0);
    cuda_kernels().fill(arg(t.gpu), 0.0);  // the cudaMemsetAsync path
    check_equal(t, "fill zeros");
  }
  // An int64 fill of a value int64 cannot hold (NaN, an infinity, 1e19) converts as the CPU's
  // cast_to does.
  for (double value : {std::nan(""), std::numeric_limits<double>::infinity(), 1e19, -1e19}) {
    CAPTURE(value);
    Twin t = output_twin({3, 5}, kInt64, 1.0);
    cpu_kernels().fill(arg(t.cpu), value);
    cuda_kernels().fill(arg(t.gpu), value);
    check_equal_int64(t, "int64 fill out of range");
  }
}

TEST_CASE("reductions match the CPU for every op and each thread layout") {
  // (rows, cols) and the reduced dim: columns of a wide matrix and many short rows (one thread per
  // output), long rows (a block per output), moderate rows (a warp per output), and everything.
  struct Layout {
    int64_t rows, cols;
    int dim;  // -1: all
  };
  const Layout layouts[] = {
      {37, 1100, 0}, {4096, 8, 1}, {5, 10000, 1}, {300, 50, 1}, {64, 129, -1}};
  const ReduceOp ops[] = {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Prod, ReduceOp::Max,
                          ReduceOp::Min, ReduceOp::Any,  ReduceOp::All};
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kBool}) {
    for (const Layout& l : layouts) {
      for (ReduceOp r : ops) {
        CAPTURE(dtype_name(dtype));
        CAPTURE(l.rows);
        CAPTURE(l.dim);
        CAPTURE(static_cast<int>(r));
        // Prod stays finite with values near 1.
        const double lo = r == ReduceOp::Prod ? 0.999 : -3.0,
                     hi = r == ReduceOp::Prod ? 1.001 : 3.0;
        const Twin in = input(l.rows, l.cols, dtype, lo, hi, 81);
        const Shape out_shape =
            l.dim < 0 ? Shape{1, 1} : (l.dim == 0 ? Shape{1, l.cols} : Shape{l.rows, 1});
        const DType out_dtype = r == ReduceOp::Any || r == ReduceOp::All       ? kBool
                                : (r == ReduceOp::Mean && !is_floating(dtype)) ? kFloat32
                                : (dtype == kBool && (r == ReduceOp::Sum || r == ReduceOp::Prod))
                                    ? kInt64
                                    : dtype;
        Twin out = output_twin(out_shape, out_dtype);
        cpu_kernels().reduce(r, arg(out.cpu), arg(in.cpu));
        cuda_kernels().reduce(r, arg(out.gpu), arg(in.gpu));
        // Sums accumulate in double on both sides, in different orders.
        check_close(out, rtol_for(dtype), 1e-9, "reduce");
      }
    }
  }
}

TEST_CASE("var, logsumexp and norms match the CPU") {
  for (DType dtype : {kFloat32, kFloat64, kFloat16}) {
    CAPTURE(dtype_name(dtype));
    const Twin in = input(300, 200, dtype, -4, 4, 91);
    for (int dim : {0, 1}) {
      CAPTURE(dim);
      const Shape out_shape = dim == 0 ? Shape{1, 200} : Shape{300, 1};
      Twin v = output_twin(out_shape, dtype);
      cpu_kernels().var(arg(v.cpu), arg(in.cpu), 1, true);
      cuda_kernels().var(arg(v.gpu), arg(in.gpu), 1, true);
      check_close(v, rtol_for(dtype) * 0.05, 0.0, "std");
      Twin lse = output_twin(out_shape, dtype);
      cpu_kernels().logsumexp(arg(lse.cpu), arg(in.cpu));
      cuda_kernels().logsumexp(arg(lse.gpu), arg(in.gpu));
      check_close(lse, rtol_for(dtype) * 0.05, 1e-12, "logsumexp");
      for (double p : {0.0, 1.0, 2.0, 3.0, std::numeric_limits<double>::infinity(),
                       -std::numeric_limits<double>::infinity()}) {
        CAPTURE(p);
        Twin n = output_twin(out_shape, dtype);
        cpu_kernels().norm(arg(n.cpu), arg(in.cpu), p);
        cuda_kernels().norm(arg(n.gpu), arg(in.gpu), p);
        check_close(n, rtol_for(dtype) * 0.05, 0.0, "norm");
      }
    }
  }
  // A row of -inf gives -inf; a row with a NaN gives NaN.
  const double inf = std::numeric_limits<double>::infinity();
  const Twin special = twin(tensor({{-inf, -inf, -inf}, {1.0, std::nan(""), 2.0}}));
  Twin lse = output_twin({2, 1}, kFloat32);
  cpu_kernels().logsumexp(arg(lse.cpu), arg(special.cpu));
  cuda_kernels().logsumexp(arg(lse.gpu), arg(special.gpu));
  check_equal(lse, "logsumexp special values");
}

TEST_CASE("arg max and min return the first index among ties and the first NaN") {
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kInt64}) {
    CAPTURE(dtype_name(dtype));
    // Integers in [0, 4): many ties in every row of 3000 (a block per row) and every column.
    const Twin in = input(40, 3000, dtype, 0, 4, 101);
    for (int dim : {0, 1}) {
      for (bool is_max : {true, false}) {
        CAPTURE(dim);
        CAPTURE(is_max);
        const Shape out_shape = dim == 0 ? Shape{1, 3000} : Shape{40, 1};
        Twin idx = output_twin(out_shape, kInt64);
        Twin val = output_twin(out_shape, dtype);
        cpu_kernels().arg_reduce(is_max, arg(val.cpu), arg(idx.cpu), arg(in.cpu), dim);
        cuda_kernels().arg_reduce(is_max, arg(val.gpu), arg(idx.gpu), arg(in.gpu), dim);
        check_equal(idx, "arg_reduce indices");
        check_equal(val, "arg_reduce values");
      }
    }
  }
  // Rows of 50 along dim 1: a warp per output, ties combined across its lanes.
  for (DType dtype : {kFloat32, kBFloat16, kInt64}) {
    CAPTURE(dtype_name(dtype));
    const Twin rows = input(300, 50, dtype, 0, 4, 102);
    Twin idx = output_twin({300, 1}, kInt64);
    Twin val = output_twin({300, 1}, dtype);
    cpu_kernels().arg_reduce(true, arg(val.cpu), arg(idx.cpu), arg(rows.cpu), 1);
    cuda_kernels().arg_reduce(true, arg(val.gpu), arg(idx.gpu), arg(rows.gpu), 1);
    check_equal(idx, "arg_reduce indices, a warp per row");
    check_equal(val, "arg_reduce values, a warp per row");
  }
  const Twin nan = twin(tensor({{1.0, std::nan(""), 5.0, std::nan("")}}));
  Twin idx = output_twin({1, 1}, kInt64);
  Twin val = output_twin({1, 1}, kFloat32);
  cpu_kernels().arg_reduce(true, arg(val.cpu), arg(idx.cpu), arg(nan.cpu), 1);
  cuda_kernels().arg_reduce(true, arg(val.gpu), arg(idx.gpu), arg(nan.gpu), 1);
  check_equal(idx, "argmax with NaN");
}

TEST_CASE("softmax and log_softmax and their backward match the CPU on both paths") {
  // Rows of 10, 1000 and 1024 (a warp each, values in registers) and 1025 and 5000 (a block
  // each, online normaliser), along the last dim and along the first (strided rows).
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    for (int64_t n : {10, 1000, 1024, 1025, 5000}) {
      for (int dim : {0, 1}) {
        for (bool log : {false, true}) {
          CAPTURE(dtype_name(dtype));
          CAPTURE(n);
          CAPTURE(dim);
          CAPTURE(log);
          const Shape shape = dim == 1 ? Shape{33, n} : Shape{n, 33};
          const Twin x = twin(random_tensor(shape, dtype, -8, 8, 111));
          Twin y = output_twin(shape, dtype);
          cpu_kernels().softmax(arg(y.cpu), arg(x.cpu), dim, log);
          cuda_kernels().softmax(arg(y.gpu), arg(x.gpu), dim, log);
          check_close(y, rtol_for(dtype) * 2, rtol_for(dtype) * 1e-3, "softmax");
          const Twin g = twin(random_tensor(shape, dtype, -1, 1, 112));
          Twin gx = output_twin(shape, dtype);
          cpu_kernels().softmax_backward(arg(gx.cpu), arg(g.cpu), arg(y.cpu), dim, log);
          cuda_kernels().softmax_backward(arg(gx.gpu), arg(g.gpu), arg(y.cpu.to(kCuda0)), dim, log);
          check_close(gx, rtol_for(dtype) * 5, rtol_for(dtype) * 1e-2, "softmax_backward");
        }
      }
    }
  }
  // Mixed dtypes: float16 in, float32 out. A row with +inf and a row of -inf end as NaN.
  const double inf = std::numeric_limits<double>::infinity();
  const Twin special = twin(tensor({{1.0, inf, 2.0}, {-inf, -inf, -inf}, {0.0, -inf, 1.0}}));
  for (bool log : {false, true}) {
    Twin y = output_twin({3, 3}, kFloat32);
    cpu_kernels().softmax(arg(y.cpu), arg(special.cpu), 1, log);
    cuda_kernels().softmax(arg(y.gpu), arg(special.gpu), 1, log);
    check_close(y, 1e-6, 0.0, "softmax special values");
  }
  const Twin half = twin(random_tensor({16, 300}, kFloat16, -4, 4, 113));
  Twin y = output_twin({16, 300}, kFloat32);
  cpu_kernels().softmax(arg(y.cpu), arg(half.cpu), 1, true);
  cuda_kernels().softmax(arg(y.gpu), arg(half.gpu), 1, true);
  check_close(y, 1e-5, 1e-6, "log_softmax float16 -> float32");
}

TEST_CASE("gemm matches the CPU for each dtype, transposed operands and batches") {
  struct Case {
    DType dtype;
    bool ta, tb;
    int64_t batch;
    double alpha, beta;
  };
  const Case cases[] = {
      {kFloat32, false, false, 1, 1.0, 0.0}, {kFloat32, true, false, 1, 2.0, 1.0},
      {kFloat32, false, true, 3, 1.0, 0.5},  {kFloat64, true, true, 4, 1.0, 0.0},
      {kFloat16, false, false, 2, 1.0, 0.0}, {kFloat16, true, true, 1, 0.5, 1.0},
      {kBFloat16, false, true, 2, 1.0, 0.0}, {kBFloat16, true, false, 1, 0.5, 1.0}};
  const int64_t m = 33, n = 65, k = 47;
  for (const Case& c : cases) {
    CAPTURE(dtype_name(c.dtype));
    CAPTURE(c.ta);
    CAPTURE(c.tb);
    CAPTURE(c.batch);
    // A stored (batch, m, k) or, transposed, (batch, k, m) and read through its transpose; B is
    // shared by every batch (batch stride 0).
    const Twin a = twin(
        random_tensor(c.ta ? Shape{c.batch, k, m} : Shape{c.batch, m, k}, c.dtype, -1, 1, 121));
    const Twin b = twin(random_tensor(c.tb ? Shape{n, k} : Shape{k, n}, c.dtype, -1, 1, 122));
    Twin out = twin(random_tensor({c.batch, m, n}, c.dtype, -1, 1, 123));
    auto args_for = [&](const Tensor& ta, const Tensor& tb, const Tensor& tc) {
      kernels::GemmArgs g;
      g.dtype = c.dtype;
      g.batch = c.batch, g.m = m, g.n = n, g.k = k;
      g.a = {ta.data_ptr(), c.ta ? 1 : k, c.ta ? m : 1, m * k};
      g.b = {tb.data_ptr(), c.tb ? 1 : n, c.tb ? k : 1, 0};
      g.c = tc.data_ptr();
      g.ldc = n;
      g.batch_stride_c = m * n;
      g.alpha = c.alpha, g.beta = c.beta;
      return g;
    };
    cpu_kernels().gemm(args_for(a.cpu, b.cpu, out.cpu));
    cuda_kernels().gemm(args_for(a.gpu, b.gpu, out.gpu));
    // Different summation orders (and 16-bit rounding of C on both sides).
    const double tol = c.dtype == kBFloat16  ? 4e-2
                       : c.dtype == kFloat16 ? 1e-2
                       : c.dtype == kFloat32 ? 1e-5
                                             : 1e-13;
    check_close(out, tol, tol, "gemm");
  }
}

TEST_CASE("gemm with k = 0 scales C by beta, and zeros it for beta = 0") {
  for (double beta : {0.0, 0.5}) {
    Twin out = twin(random_tensor({4, 6}, kFloat32, -1, 1, 131));
    kernels::GemmArgs g;
    g.m = 4, g.n = 6, g.k = 0, g.ldc = 6, g.beta = beta;
    g.a = {out.cpu.data_ptr(), 0, 1, 0};
    g.b = {out.cpu.data_ptr(), 6, 1, 0};
    g.c = out.cpu.data_ptr();
    cpu_kernels().gemm(g);
    g.a.data = g.b.data = g.c = out.gpu.data_ptr();
    cuda_kernels().gemm(g);
    check_equal(out, "gemm k = 0");
  }
}

#ifndef MEMGRAD_CUDA_TWIN_ON_CPU  // the CPU packs such operands instead
TEST_CASE("gemm rejects operands whose strides cuBLAS cannot express") {
  const Tensor a = zeros({8, 8}, kCuda0);
  kernels::GemmArgs g;
  g.m = 4, g.n = 4, g.k = 4;
  g.a = {a.data_ptr(), 2, 2, 0};  // every other row and column: neither stride is 1
  g.b = {a.data_ptr(), 8, 1, 0};
  g.c = a.data_ptr();
  g.ldc = 8;
  CHECK_THROWS_WITH_AS(cuda_kernels().gemm(g), doctest::Contains("strides (2, 2)"),
                       memgrad::GemmLayoutError);
}
#endif

}  // TEST_SUITE("cuda")
