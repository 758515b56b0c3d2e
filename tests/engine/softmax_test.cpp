// softmax / log_softmax: closed-form values, stability for large inputs, every dim and layout
// (rows, columns, strided) on every device, dtypes, memory (only the result is allocated, no
// full-size temporary), softmax_out, errors, and the softmax_backward kernel called directly
// (the engine suite has no autograd to reach it).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/memgrad.h"
#include "engine/op_support.h"
#include "kernels/backend.h"
#include "tests/support/stats_delta.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::testing::check_values;
using memgrad::testing::devices_under_test;
using memgrad::testing::rounded;
using memgrad::testing::StatsDelta;

namespace {

// Softmax (or log_softmax) of `x` along `dim`, computed naively in double from its values.
std::vector<double> reference_softmax(const Tensor& x, int dim, bool log) {
  const std::vector<double> v = x.to_vector<double>();
  const Shape& sizes = x.sizes();
  int64_t inner = 1;
  for (int d = dim + 1; d < sizes.size(); ++d) inner *= sizes[d];
  const int64_t n = sizes[dim];
  const int64_t outer = static_cast<int64_t>(v.size()) / (n * inner);
  std::vector<double> out(v.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return static_cast<size_t>((o * n + k) * inner + i); };
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < n; ++k) m = std::max(m, v[at(k)]);
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += std::exp(v[at(k)] - m);
      for (int64_t k = 0; k < n; ++k) {
        out[at(k)] = log ? v[at(k)] - m - std::log(s) : std::exp(v[at(k)] - m) / s;
      }
    }
  }
  return out;
}

void check_softmax(const Tensor& x, int dim, double tol) {
  CAPTURE(dim);
  CAPTURE(to_string(x.sizes()));
  check_values(softmax(x, dim), x.sizes(), reference_softmax(x, dim, false), tol);
  check_values(log_softmax(x, dim), x.sizes(), reference_softmax(x, dim, true), tol * 10);
}

// grad_in of softmax_backward through the CPU kernel, into a fresh tensor like `y`.
Tensor backward_kernel(const Tensor& grad, const Tensor& y, int dim, bool log) {
  Tensor grad_in = empty(y.sizes(), y.dtype());
  kernels::cpu_backend().softmax_backward(detail::operand(grad_in), detail::operand(grad),
                                          detail::operand(y), dim, log);
  return grad_in;
}

// The closed forms: softmax gx = y (g - sum(g y)); log_softmax gx = g - exp(y) sum(g).
std::vector<double> reference_backward(const Tensor& grad, const Tensor& y, int dim, bool log) {
  const std::vector<double> g = grad.to_vector<double>(), yv = y.to_vector<double>();
  const Shape& sizes = y.sizes();
  int64_t inner = 1;
  for (int d = dim + 1; d < sizes.size(); ++d) inner *= sizes[d];
  const int64_t n = sizes[dim];
  const int64_t outer = static_cast<int64_t>(g.size()) / (n * inner);
  std::vector<double> out(g.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return static_cast<size_t>((o * n + k) * inner + i); };
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += log ? g[at(k)] : g[at(k)] * yv[at(k)];
      for (int64_t k = 0; k < n; ++k) {
        out[at(k)] = log ? g[at(k)] - std::exp(yv[at(k)]) * s : yv[at(k)] * (g[at(k)] - s);
      }
    }
  }
  return out;
}

}  // namespace

TEST_SUITE("engine") {

TEST_CASE("softmax matches exp(x) / sum(exp(x)) along any dim") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0);
    const double s = e1 + e2 + e3;
    const Tensor x = tensor({1.0, 2.0, 3.0}, dev);
    check_values(softmax(x, 0), {3}, {e1 / s, e2 / s, e3 / s});
    check_values(x.log_softmax(-1), {3}, {1 - std::log(s), 2 - std::log(s), 3 - std::log(s)}, 1e-6);
    // Rows [1, 2, 3] and [1, 1, 1]; along dim 0 each column compares 1 with 1, 2 or 3.
    const Tensor m = tensor({{1.0, 2.0, 3.0}, {1.0, 1.0, 1.0}}, dev);
    check_values(m.softmax(1), {2, 3}, {e1 / s, e2 / s, e3 / s, 1.0 / 3, 1.0 / 3, 1.0 / 3});
    check_values(m.softmax(0), {2, 3},
                 {0.5, e2 / (e2 + e1), e3 / (e3 + e1), 0.5, e1 / (e2 + e1), e1 / (e3 + e1)});
    CHECK_EQ(m.softmax(1).device(), dev);
    check_values(softmax(scalar_tensor(5.0, dev), 0), {}, {1});
  }
}

TEST_CASE("softmax rows sum to one and stay finite for large inputs") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    // Shifting by 1000 changes nothing: exp(1000) would overflow without the max subtraction.
    const Tensor big = tensor({1000.0, 1001.0, 1002.0}, dev);
    check_values(big.softmax(0), {3}, tensor({0.0, 1.0, 2.0}).softmax(0).to_vector<double>());
    check_values(tensor({1000.0, 0.0}, dev).log_softmax(0), {2}, {0, -1000}, 1e-3);
    check_values(tensor({-1000.0, -1001.0}, dev).softmax(0), {2},
                 {1 / (1 + std::exp(-1.0)), std::exp(-1.0) / (1 + std::exp(-1.0))});
    const Tensor r = randn({37, 129}, dev) * 30.0;
    check_values(r.softmax(1).sum({1}), {37}, std::vector<double>(37, 1.0), 1e-5);
    check_values(r.softmax(0).sum({0}), {129}, std::vector<double>(129, 1.0), 1e-5);
  }
}

TEST_CASE("log_softmax equals log(softmax) on every layout") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor x = randn({6, 7, 5}, dev);
    for (int dim = 0; dim < 3; ++dim) {
      CAPTURE(dim);
      check_values(x.log_softmax(dim), x.sizes(), x.softmax(dim).log().to_vector<double>(), 1e-5);
      const Tensor p = x.permute({2, 0, 1});
      check_values(p.log_softmax(dim), p.sizes(), p.softmax(dim).log().to_vector<double>(), 1e-5);
    }
  }
}

TEST_CASE("softmax of rows, columns and strided layouts matches the reference") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    // Rows (dim innermost), parallel over rows.
    const Tensor rows = randn({64, 1024}, dev);
    check_softmax(rows, 1, 1e-6);
    // Columns (dim outer, inner dim contiguous), wider than one column block.
    check_softmax(rows, 0, 1e-6);
    const Tensor cube = randn({3, 50, 70}, dev);
    check_softmax(cube, 1, 1e-6);
    check_softmax(cube, 0, 1e-6);
    // Transposed and stepped views go through the strided path.
    const Tensor tr = randn({40, 30}, dev).t();
    check_softmax(tr, 1, 1e-6);
    check_softmax(tr, 0, 1e-6);
    const Tensor stepped = randn({8, 20}, dev).slice(1, 1, 20, 3);
    check_softmax(stepped, 1, 1e-6);
    check_softmax(stepped, 0, 1e-6);
    // Expanded along dim (stride 0): five equal values give 1/5 each.
    const Tensor ex = tensor({2.0, -1.0}, dev).view({2, 1}).expand({2, 5});
    check_values(ex.softmax(1), {2, 5}, std::vector<double>(10, 0.2));
    // Along dim 0 each column is [2, -1]: [1, e^-3] / (1 + e^-3).
    const double a = 1 / (1 + std::exp(-3.0)), b = std::exp(-3.0) / (1 + std::exp(-3.0));
    check_values(ex.softmax(0), {2, 5}, {a, a, a, a, a, b, b, b, b, b});
  }
}

TEST_CASE("softmax keeps float16 and float64 dtypes") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor x = randn({5, 33}, dev);
    const Tensor h = x.to(kFloat16);
    CHECK_EQ(h.softmax(1).dtype(), kFloat16);
    check_values(h.softmax(1), {5, 33}, reference_softmax(h, 1, false), 2e-3);
    check_values(h.softmax(0), {5, 33}, reference_softmax(h, 0, false), 2e-3);
    check_values(h.log_softmax(1), {5, 33}, reference_softmax(h, 1, true), 1e-2);
    const Tensor d = x.to(kFloat64);
    CHECK_EQ(d.softmax(0).dtype(), kFloat64);
    check_values(d.softmax(1), {5, 33}, reference_softmax(d, 1, false), 1e-14);
    check_values(d.softmax(0), {5, 33}, reference_softmax(d, 0, false), 1e-14);
    check_values(d.t().log_softmax(1), {33, 5}, reference_softmax(d.t(), 1, true), 1e-13);
  }
}

TEST_CASE("softmax propagates NaN and -inf rows like PyTorch") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = tensor({{0.0, nan, 1.0}, {-inf, 0.0, 0.0}});
  const std::vector<double> y = x.softmax(1).to_vector<double>();
  for (size_t k = 0; k < 3; ++k) CHECK(std::isnan(y[k]));  // a NaN poisons its row
  CHECK_EQ(y[3], 0.0);                                     // exp(-inf) = 0
  CHECK_EQ(y[4], doctest::Approx(0.5));
  // A row of -inf only: exp(-inf - (-inf)) is NaN in PyTorch too.
  const std::vector<double> z = tensor({-inf, -inf}).softmax(0).to_vector<double>();
  CHECK(std::isnan(z[0]));
}

TEST_CASE("softmax allocates exactly its result and no full-size temporary") {
  for (DType dtype : {kFloat32, kFloat16, kFloat64}) {
    for (int dim : {0, 1}) {
      CAPTURE(dim);
      CAPTURE(dtype_name(dtype));
      PolicyAllocator& alloc = allocator_for(kCPU);
      const Tensor x = randn({128, 96}).to(dtype);
      alloc.reset_peak_stats();
      const int64_t before = alloc.stats().allocated_bytes.all().current;
      StatsDelta d(alloc);
      const Tensor y = x.softmax(dim);
      const Tensor z = x.log_softmax(dim);
      CHECK_EQ(d.allocations(), 2);
      CHECK_EQ(d.allocated(), 2 * rounded(x.nbytes()));
      CHECK_EQ(alloc.stats().allocated_bytes.all().peak - before, 2 * rounded(x.nbytes()));
      CHECK_FALSE(y.is_view());
    }
  }
  // A strided input: still only the result.
  PolicyAllocator& alloc = allocator_for(kCPU);
  const Tensor t = randn({64, 80}).t();
  alloc.reset_peak_stats();
  const int64_t before = alloc.stats().allocated_bytes.all().current;
  const Tensor y = t.softmax(0);
  CHECK_EQ(alloc.stats().allocated_bytes.all().peak - before, rounded(t.nbytes()));
}

TEST_CASE("softmax_out writes into out without allocating and bumps its version") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor x = tensor({{1.0, 2.0}, {3.0, 3.0}}, dev);
    Tensor out = empty({2, 2}, dev);
    const uint32_t v0 = out.version();
    StatsDelta d(allocator_for(dev));
    Tensor& r = softmax_out(out, x, 1);
    CHECK_EQ(d.allocated(), 0);
    CHECK(r.is_same(out));
    CHECK_EQ(out.version(), v0 + 1);
    const double e = std::exp(1.0);
    check_values(out, {2, 2}, {1 / (1 + e), e / (1 + e), 0.5, 0.5});
    // In place: out may be x itself.
    Tensor self = x.clone();
    softmax_out(self, self, 0);
    check_values(self, {2, 2}, reference_softmax(x, 0, false));
    // A wrong shape is resized: one new storage of the result, the old one freed.
    Tensor small = empty({1}, dev);
    const int64_t allocs_before = allocator_for(dev).stats().allocation.all().allocated;
    softmax_out(small, x, 1);
    CHECK_EQ(allocator_for(dev).stats().allocation.all().allocated - allocs_before, 1);
    CHECK_EQ(small.sizes(), Shape{2, 2});
    check_values(small, {2, 2}, {1 / (1 + e), e / (1 + e), 0.5, 0.5});
  }
}

TEST_CASE("softmax_backward kernel matches the closed forms") {
  // y = [0.2, 0.3, 0.5], g = [1, 0, 0]: sum(g y) = 0.2, gx = y (g - 0.2) = [0.16, -0.06, -0.1].
  const Tensor y = tensor({0.2, 0.3, 0.5});
  const Tensor g = tensor({1.0, 0.0, 0.0});
  check_values(backward_kernel(g, y, 0, false), {3}, {0.16, -0.06, -0.1});
  // log_softmax: y = log p, gx = g - p sum(g) = [1 - 0.2, -0.3, -0.5].
  check_values(backward_kernel(g, y.log(), 0, true), {3}, {0.8, -0.3, -0.5});
  // Rows, columns and strided layouts, float32 and float64.
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype_name(dtype));
    const double tol = dtype == kFloat32 ? 1e-5 : 1e-12;
    const Tensor x = randn({40, 300}).to(dtype);
    const Tensor grad = randn({40, 300}).to(dtype);
    for (int dim : {0, 1}) {
      for (bool log : {false, true}) {
        CAPTURE(dim);
        CAPTURE(log);
        const Tensor out = log ? x.log_softmax(dim) : x.softmax(dim);
        check_values(backward_kernel(grad, out, dim, log), x.sizes(),
                     reference_backward(grad, out, dim, log), tol);
        // Transposed operands take the strided path.
        const Tensor out_t = out.t(), grad_t = grad.t();
        check_values(backward_kernel(grad_t, out_t, 1 - dim, log), out_t.sizes(),
                     reference_backward(grad_t, out_t, 1 - dim, log), tol);
      }
    }
  }
  // float16 operands compute in float.
  const Tensor yh = tensor({0.2, 0.3, 0.5}).to(kFloat16);
  check_values(backward_kernel(g.to(kFloat16), yh, 0, false), {3}, {0.16, -0.06, -0.1}, 1e-3);
}

TEST_CASE("softmax rejects integer inputs and out-of-range dims") {
  CHECK_THROWS_WITH_AS(softmax(tensor({1, 2}), 0),
                       doctest::Contains("[softmax] expected a floating point input, got int64"),
                       DTypeError);
  CHECK_THROWS_WITH_AS(log_softmax(tensor({1, 2}), 0), doctest::Contains("[log_softmax]"),
                       DTypeError);
  CHECK_THROWS_WITH_AS(ones({2, 3}).softmax(2),
                       doctest::Contains("[softmax] dimension out of range"), IndexError);
  Tensor out = empty({2}, kInt64);
  CHECK_THROWS_WITH_AS(softmax_out(out, ones({2}), 0), doctest::Contains("[softmax] out has dtype"),
                       DTypeError);
}

}  // TEST_SUITE("engine")
