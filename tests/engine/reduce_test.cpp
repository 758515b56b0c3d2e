// Reductions: values against hand-computed results and a naive reference, keepdim shapes,
// negative and repeated dims, contiguous and strided inputs on every device, dtypes, NaN and
// tie rules, numerical accuracy, memory (exactly the result is allocated) and errors.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "engine/memgrad.h"
#include "tests/support/error_check.h"
#include "tests/support/stats_delta.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::testing::caught;
using memgrad::testing::check_dtypes;
using memgrad::testing::check_shape;
using memgrad::testing::check_values;
using memgrad::testing::devices_under_test;
using memgrad::testing::rounded;
using memgrad::testing::StatsDelta;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The elements of each output of reducing `sizes` over `dims` (all dims when empty), grouped
// in row-major order of the kept dims.
std::vector<std::vector<double>> groups_of(const std::vector<double>& values, const Shape& sizes,
                                           const std::vector<int>& dims) {
  std::vector<bool> reduced(static_cast<size_t>(sizes.size()), dims.empty());
  for (int d : dims) reduced[static_cast<size_t>(d)] = true;
  int64_t outputs = 1;
  for (int d = 0; d < sizes.size(); ++d) outputs *= reduced[static_cast<size_t>(d)] ? 1 : sizes[d];
  std::vector<std::vector<double>> groups(static_cast<size_t>(outputs));
  for (size_t i = 0; i < values.size(); ++i) {
    int64_t rem = static_cast<int64_t>(i), out = 0, scale = 1;
    for (int d = sizes.size() - 1; d >= 0; --d) {
      const int64_t idx = rem % sizes[d];
      rem /= sizes[d];
      if (!reduced[static_cast<size_t>(d)]) {
        out += idx * scale;
        scale *= sizes[d];
      }
    }
    groups[static_cast<size_t>(out)].push_back(values[i]);
  }
  return groups;
}

// Exact comparison that also accepts equal infinities and NaN where NaN is expected
// (check_values compares differences, and inf - inf is NaN).
void check_special(const Tensor& t, const Shape& sizes, const std::vector<double>& expected) {
  REQUIRE_EQ(t.sizes(), sizes);
  const std::vector<double> got = t.to_vector<double>();
  REQUIRE_EQ(got.size(), expected.size());
  for (size_t k = 0; k < got.size(); ++k) {
    CAPTURE(k);
    if (std::isnan(expected[k])) {
      CHECK(std::isnan(got[k]));
    } else {
      CHECK_EQ(got[k], expected[k]);
    }
  }
}

using GroupFn = std::function<double(const std::vector<double>&)>;

std::vector<double> reference(const Tensor& x, const std::vector<int>& dims, const GroupFn& f) {
  std::vector<double> out;
  for (const auto& g : groups_of(x.to_vector<double>(), x.sizes(), dims)) out.push_back(f(g));
  return out;
}

double ref_sum(const std::vector<double>& g) {
  double s = 0;
  for (double v : g) s += v;
  return s;
}
double ref_max(const std::vector<double>& g) {
  double m = -kInf;
  for (double v : g) m = std::max(m, v);
  return m;
}
double ref_min(const std::vector<double>& g) {
  double m = kInf;
  for (double v : g) m = std::min(m, v);
  return m;
}
double ref_var(const std::vector<double>& g) {
  const double mean = ref_sum(g) / static_cast<double>(g.size());
  double ss = 0;
  for (double v : g) ss += (v - mean) * (v - mean);
  return ss / static_cast<double>(g.size() - 1);
}
double ref_norm2(const std::vector<double>& g) {
  double ss = 0;
  for (double v : g) ss += v * v;
  return std::sqrt(ss);
}
double ref_logsumexp(const std::vector<double>& g) {
  const double m = ref_max(g);
  double s = 0;
  for (double v : g) s += std::exp(v - m);
  return m + std::log(s);
}

// Output sizes of reducing `sizes` over `dims` without keepdim.
Shape reduced_shape(const Shape& sizes, const std::vector<int>& dims) {
  Shape out;
  for (int d = 0; d < sizes.size(); ++d) {
    bool r = false;
    for (int e : dims) r = r || e == d;
    if (!r) out.push_back(sizes[d]);
  }
  return out;
}

// Checks every reduction of `x` over `dims` against the naive reference.
void check_all_reductions(const Tensor& x, const std::vector<int>& dims) {
  Shape dim_shape;
  for (int d : dims) dim_shape.push_back(d);
  const Shape out = reduced_shape(x.sizes(), dims);
  check_values(x.sum(dim_shape), out, reference(x, dims, ref_sum), 1e-3);
  check_values(x.mean(dim_shape), out,
               reference(x, dims,
                         [](const std::vector<double>& g) {
                           return ref_sum(g) / static_cast<double>(g.size());
                         }),
               1e-5);
  check_values(x.amax(dim_shape), out, reference(x, dims, ref_max), 0);
  check_values(x.amin(dim_shape), out, reference(x, dims, ref_min), 0);
  check_values(x.var(dim_shape), out, reference(x, dims, ref_var), 1e-4);
  check_values(x.norm(2.0, dim_shape), out, reference(x, dims, ref_norm2), 1e-3);
  check_values(x.logsumexp(dim_shape), out, reference(x, dims, ref_logsumexp), 1e-4);
}

}  // namespace

TEST_SUITE("engine") {

TEST_CASE("sum reduces all dims, one dim, several dims and negative dims") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    // x = [[0, 1, 2], [3, 4, 5]]
    const Tensor x = arange(6, TensorOptions(kFloat32).with_device(dev)).view({2, 3});
    check_values(x.sum(), {}, {15});
    check_values(x.sum({0}), {3}, {3, 5, 7});
    check_values(x.sum({1}), {2}, {3, 12});
    check_values(x.sum({-1}), {2}, {3, 12});
    check_values(x.sum({0, 1}), {}, {15});
    check_values(x.sum({-1, 0}), {}, {15});
    check_values(x.sum({1}, true), {2, 1}, {3, 12});
    check_values(x.sum({0, 1}, true), {1, 1}, {15});
    check_values(x.sum({}, true), {1, 1}, {15});
    CHECK_EQ(x.sum({1}).device(), dev);
    // 3-d: sum over the outer and inner dims keeps the middle one.
    const Tensor y = arange(24, TensorOptions(kFloat32).with_device(dev)).view({2, 3, 4});
    // y[i, j, k] = 12 i + 4 j + k; sum over i, k: 2 * (4 * 4 j + 6) + 12 * 4 = 32 j + 60
    check_values(y.sum({0, 2}), {3}, {60, 92, 124});
    check_values(y.sum({0, -1}, true), {1, 3, 1}, {60, 92, 124});
  }
}

TEST_CASE("mean, amax and amin follow the same dims and keepdim rules") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor x = tensor({{1.0, 5.0, 3.0}, {-2.0, 0.0, 8.0}}, dev);
    check_values(x.mean(), {}, {2.5});
    check_values(x.mean({0}), {3}, {-0.5, 2.5, 5.5});
    check_values(x.mean({-1}, true), {2, 1}, {3, 2});
    check_values(x.amax({1}), {2}, {5, 8});
    check_values(x.amin({0}), {3}, {-2, 0, 3});
    check_values(x.amax({0, 1}, true), {1, 1}, {8});
    check_values(x.max(), {}, {8});
    check_values(x.min(), {}, {-2});
  }
}

TEST_CASE("strided inputs reduce like their contiguous copies") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor base = arange(12, TensorOptions(kFloat32).with_device(dev)).view({3, 4});
    // Transposed: tr = [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]]
    const Tensor tr = base.t();
    check_values(tr.sum({1}), {4}, {12, 15, 18, 21});
    check_values(tr.sum({0}), {3}, {6, 22, 38});
    check_values(tr.amax({1}), {4}, {8, 9, 10, 11});
    check_values(tr.sum(), {}, {66});
    // Columns 1 and 3 (step 2): [[1, 3], [5, 7], [9, 11]]
    const Tensor stepped = base.slice(1, 1, 4, 2);
    check_values(stepped.sum({0}), {2}, {15, 21});
    check_values(stepped.sum({1}), {3}, {4, 12, 20});
    check_values(stepped.mean(), {}, {6});
    check_values(stepped.amin({0}), {2}, {1, 3});
    // Expanded with stride 0: every row is [1, 2, 3].
    const Tensor expanded = tensor({1.0, 2.0, 3.0}, dev).view({1, 3}).expand({4, 3});
    check_values(expanded.sum({0}), {3}, {4, 8, 12});
    check_values(expanded.sum({1}), {4}, {6, 6, 6, 6});
    check_values(expanded.sum(), {}, {24});
    check_values(expanded.var({0}), {3}, {0, 0, 0});
    check_values(expanded.norm(1.0), {}, {24});
  }
}

TEST_CASE("every path agrees with a naive reference for all dim combinations") {
  // Shapes large enough for the parallel row, column and split paths.
  const std::vector<Shape> shapes = {{5, 7, 3}, {64, 600}, {8192, 8}, {3, 40000}};
  for (const Shape& shape : shapes) {
    const Tensor x = randn(shape);
    const int nd = shape.size();
    for (int mask = 1; mask < (1 << nd); ++mask) {
      std::vector<int> dims;
      for (int d = 0; d < nd; ++d) {
        if ((mask >> d) & 1) dims.push_back(d);
      }
      CAPTURE(to_string(shape));
      CAPTURE(mask);
      check_all_reductions(x, dims);
      if (nd >= 2) check_all_reductions(x.transpose(0, nd - 1), dims);
    }
  }
  // A permuted 3-d view and a stepped slice on the simulated device.
  const Tensor p = randn({6, 5, 4}, Device("sim:0")).permute({2, 0, 1});
  check_all_reductions(p, {0, 2});
  check_all_reductions(p, {1});
  check_all_reductions(randn({9, 10}).slice(0, 1, 9, 3).slice(1, 0, 10, 2), {0});
}

TEST_CASE("integer and bool sums produce int64 and sum(dtype) converts") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor i = tensor({1, 2, 3, 4, 5, 6}, dev).view({2, 3});
    CHECK_EQ(i.dtype(), kInt64);
    CHECK_EQ(i.sum().dtype(), kInt64);
    CHECK_EQ(i.sum().item<int64_t>(), 21);
    check_values(i.sum({0}), {3}, {5, 7, 9});
    // Beyond float32's exact integers: int64 accumulation keeps every unit.
    const Tensor big = tensor({int64_t{1} << 40, int64_t{1}, int64_t{1}}, dev);
    CHECK_EQ(big.sum().item<int64_t>(), (int64_t{1} << 40) + 2);
    const Tensor b = tensor({1.0, -2.0, 0.0, 3.0}, dev).gt(0.0);
    CHECK_EQ(b.sum().dtype(), kInt64);
    CHECK_EQ(b.sum().item<int64_t>(), 2);
    const Tensor f = i.sum(kFloat64);
    CHECK_EQ(f.dtype(), kFloat64);
    CHECK_EQ(f.item<double>(), 21.0);
    CHECK_EQ(tensor({0.5, 0.25}, dev).sum(kFloat64).dtype(), kFloat64);
    check_values(i.amax({1}), {2}, {3, 6});
    CHECK_EQ(i.max().dtype(), kInt64);
  }
}

TEST_CASE("float16 inputs accumulate in float and return float16") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    // A float16 accumulator stalls at 2048 (2048 + 1 rounds back to 2048).
    const Tensor ones16 = ones({10000}, TensorOptions(kFloat16).with_device(dev));
    const Tensor s = ones16.sum();
    CHECK_EQ(s.dtype(), kFloat16);
    CHECK_EQ(s.item<double>(), 10000.0);
    check_values(ones16.view({100, 100}).t().sum({1}).slice(0, 0, 2), {2}, {100, 100});
    check_values(ones16.view({100, 100}).sum({0}).slice(0, 0, 2), {2}, {100, 100});
    CHECK_EQ(ones16.mean().item<double>(), 1.0);
    const Tensor h = tensor({1.0, -3.0, 2.0}, TensorOptions(kFloat16).with_device(dev));
    CHECK_EQ(h.max().dtype(), kFloat16);
    CHECK_EQ(h.max().item<double>(), 2.0);
    check_values(h.var(), {}, {7.0}, 1e-3);  // mean 0, ss = 1 + 9 + 4 = 14, / 2
    check_values(h.norm(), {}, {std::sqrt(14.0)}, 1e-2);
    auto [v, idx] = h.min(0);
    CHECK_EQ(v.dtype(), kFloat16);
    CHECK_EQ(v.item<double>(), -3.0);
    CHECK_EQ(idx.item<int64_t>(), 1);
  }
}

TEST_CASE("float64 reductions compute in double") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    // 1 + 1e-12 is lost in float32 but kept in float64.
    const Tensor x = tensor({1.0, 1e-12, 2.0}, TensorOptions(kFloat64).with_device(dev));
    CHECK_EQ(x.sum().dtype(), kFloat64);
    CHECK_EQ(x.sum().item<double>(), 3.0 + 1e-12);
    check_values(x.mean(), {}, {(3.0 + 1e-12) / 3}, 1e-15);
    // Deviations from the mean (1 + 1e-12 / 3) are about 0, -1 and 1.
    check_values(x.var({0}, 0), {}, {2.0 / 3.0}, 1e-11);
    check_values(x.logsumexp({0}), {}, {std::log(std::exp(1.0) + std::exp(1e-12) + std::exp(2.0))},
                 1e-14);
  }
}

TEST_CASE("max and min along a dim pick the first index among ties") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor x = tensor({{1.0, 3.0, 3.0}, {2.0, 2.0, 1.0}}, dev);
    auto [mv, mi] = x.max(1);
    check_values(mv, {2}, {3, 2});
    check_values(mi, {2}, {1, 0});
    CHECK_EQ(mi.dtype(), kInt64);
    auto [nv, ni] = x.min(1, true);
    check_values(nv, {2, 1}, {1, 1});
    check_values(ni, {2, 1}, {0, 2});
    auto [cv, ci] = x.max(-2);
    check_values(cv, {3}, {2, 3, 3});
    check_values(ci, {3}, {1, 0, 0});
    check_values(x.argmax(1), {2}, {1, 0});
    check_values(x.argmin(0), {3}, {0, 1, 1});
    check_values(x.argmax(), {}, {1});  // flat index of the first 3
    check_values(x.argmin(), {}, {0});
    check_values(x.argmax(std::nullopt, true), {1, 1}, {1});
    // Non-contiguous: the flat index is into the row-major order of the view.
    check_values(x.t().argmax(), {}, {2});  // x.t() = [[1, 2], [3, 2], [3, 1]]
    check_values(x.t().argmin(1), {3}, {0, 1, 1});
    // Long rows with the extreme value repeated at the end.
    Tensor row = zeros({1, 70000}, dev);
    row.slice(1, 123, 124).fill_(5.0);
    row.slice(1, 69999, 70000).fill_(5.0);
    check_values(row.argmax(1), {1}, {123});
    check_values(row.argmax(), {}, {123});
    check_values(row.t().argmax(0), {1}, {123});
  }
}

TEST_CASE("NaN wins in max and min and argmax points at the first NaN") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor x = tensor({1.0, kNaN, 3.0, kNaN}, dev);
    CHECK(std::isnan(x.max().item<double>()));
    CHECK(std::isnan(x.min().item<double>()));
    CHECK(std::isnan(x.amax({0}).item<double>()));
    CHECK_EQ(x.argmax().item<int64_t>(), 1);
    CHECK_EQ(x.argmin().item<int64_t>(), 1);
    auto [v, i] = x.view({2, 2}).max(1);
    check_values(v, {2}, {kNaN, kNaN});
    check_values(i, {2}, {1, 1});
    // NaN in a column reduction and in a strided row.
    const Tensor m = tensor({{1.0, 2.0}, {kNaN, 0.0}, {4.0, 5.0}}, dev);
    check_values(m.amax({0}), {2}, {kNaN, 5});
    check_values(m.t().amax({1}), {2}, {kNaN, 5});
    check_values(m.argmax(0), {2}, {1, 2});
  }
}

TEST_CASE("var and std divide by N - correction") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    // mean 2.5, sum of squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5
    const Tensor x = tensor({1.0, 2.0, 3.0, 4.0}, dev);
    check_values(x.var(), {}, {5.0 / 3.0});
    check_values(x.var({}, 0), {}, {1.25});
    check_values(x.std(), {}, {std::sqrt(5.0 / 3.0)});
    check_values(x.std({0}, 0), {}, {std::sqrt(1.25)});
    check_values(x.view({2, 2}).var({1}, 0, true), {2, 1}, {0.25, 0.25});
    check_values(x.view({2, 2}).std({0}), {2}, {std::sqrt(2.0), std::sqrt(2.0)});
    // N - correction <= 0: 0/0 is nan, 0.5/0 is inf (PyTorch's divisor max(N - c, 0)).
    CHECK(std::isnan(tensor({7.0}, dev).var().item<double>()));
    CHECK(std::isinf(tensor({1.0, 2.0}, dev).var({}, 2).item<double>()));
    // Two passes keep precision with a large offset: var(1e4 + [1, 2, 3, 4]) = 5/3.
    check_values(tensor({10001.0, 10002.0, 10003.0, 10004.0}, dev).var(), {}, {5.0 / 3.0}, 1e-4);
  }
}

TEST_CASE("norm handles p = 1, 2, inf and other p without overflow") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor x = tensor({{3.0, -4.0}, {0.0, 1.0}}, dev);
    check_values(x.norm(1.0), {}, {8});
    check_values(x.norm(), {}, {std::sqrt(26.0)});
    check_values(x.norm(kInf), {}, {4});
    check_values(x.norm(-kInf, {1}), {2}, {3, 0});
    check_values(x.norm(0.0), {}, {3});  // non-zeros
    check_values(x.norm(3.0, {1}), {2}, {std::cbrt(91.0), 1}, 1e-5);
    check_values(x.norm(2.0, {1}, true), {2, 1}, {5, 1});
    check_values(x.t().norm(1.0, {0}), {2}, {7, 1});
    // Squares of 1e20 overflow float32; the accumulation is in double.
    const Tensor big = tensor({1e20, 1e20}, dev);
    check_values(big.norm() / 1e20, {}, {std::sqrt(2.0)}, 1e-6);
  }
}

TEST_CASE("logsumexp is stable for large values and -inf rows") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor x = tensor({{1000.0, 1000.0}, {-1000.0, -1000.0}}, dev);
    check_values(x.logsumexp({1}), {2}, {1000 + std::log(2.0), -1000 + std::log(2.0)}, 1e-4);
    check_values(x.logsumexp({0}, true), {1, 2}, {1000, 1000}, 1e-4);
    const Tensor inf_rows = tensor({{-kInf, -kInf}, {kInf, 1.0}, {kNaN, 1.0}}, dev);
    check_special(inf_rows.logsumexp({1}), {3}, {-kInf, kInf, kNaN});
    check_values(tensor({0.0, std::log(3.0)}, dev).logsumexp({0}), {}, {std::log(4.0)});
  }
}

TEST_CASE("any and all return bool for every dtype") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor f = tensor({0.0, 0.0, 2.0}, dev);
    CHECK_EQ(f.any().dtype(), kBool);
    CHECK(f.any().item<bool>());
    CHECK_FALSE(f.all().item<bool>());
    CHECK(tensor({kNaN, 1.0}, dev).all().item<bool>());  // NaN is non-zero
    CHECK_FALSE(zeros({3}, TensorOptions(kInt64).with_device(dev)).any().item<bool>());
    CHECK(tensor({1, 2}, dev).all().item<bool>());
    const Tensor b = f.gt(1.0);
    CHECK(b.any().item<bool>());
    CHECK_FALSE(b.all().item<bool>());
    CHECK(ones({70000}, dev).all().item<bool>());
  }
}

TEST_CASE("empty and 0-d inputs follow PyTorch") {
  const Tensor empty = zeros({0, 3});
  check_values(empty.sum(), {}, {0});
  check_values(empty.sum({0}), {3}, {0, 0, 0});
  CHECK_EQ(empty.sum({1}).sizes(), Shape{0});
  check_values(empty.mean({0}), {3}, {kNaN, kNaN, kNaN});
  check_special(empty.logsumexp({0}), {3}, {-kInf, -kInf, -kInf});
  CHECK_FALSE(empty.any().item<bool>());
  CHECK(empty.all().item<bool>());
  CHECK_EQ(empty.amax({1}).sizes(), Shape{0});
  const Tensor s = scalar_tensor(3.0);
  check_values(s.sum(), {}, {3});
  check_values(s.sum({0}), {}, {3});
  check_values(s.mean({-1}, true), {}, {3});
  auto [v, i] = s.max(0);
  check_values(v, {}, {3});
  check_values(i, {}, {0});
  check_values(s.argmax(), {}, {0});
}

TEST_CASE("full float32 reductions are accurate and reproducible") {
  // 4M copies of 0.1f: a float accumulator drifts by ~1e-3 relative; the exact sum is known.
  const int64_t n = int64_t{1} << 22;
  const Tensor x = full({n}, 0.1);
  const double exact = static_cast<double>(n) * static_cast<double>(0.1f);
  const double got = x.sum().item<double>();
  CHECK(std::abs(got - exact) / exact < 1e-6);
  CHECK(std::abs(x.mean().item<double>() - static_cast<double>(0.1f)) < 1e-7);
  // Column sums (B, C) -> (C) over many rows, split into row chunks.
  const Tensor cols = full({65536, 64}, 0.1).sum({0});
  check_values(cols.slice(0, 0, 3), {3}, {6553.6, 6553.6, 6553.6}, 1e-2);
  const Tensor r = randn({1 << 20});
  const Tensor a = r.sum(), b = r.sum();
  CHECK_EQ(a.item<double>(), b.item<double>());
  const Tensor m = r.view({1024, 1024});
  CHECK(equal(m.sum({0}), m.sum({0})));
}

TEST_CASE("repeated or out-of-range dims and wrong dtypes throw typed errors") {
  const Tensor x = ones({2, 3});
  CHECK_THROWS_WITH_AS(x.sum({1, -1}),
                       doctest::Contains("[sum] dim 1 appears multiple times in the list of dims"),
                       ShapeError);
  // A repeated dim: the fields hold the tensor's shape and the dims as given.
  const auto repeated = caught<ShapeError>([&] { (void)x.mean({0, 0}); });
  REQUIRE(repeated);
  CHECK_EQ(repeated->op(), "mean");
  check_shape(repeated->expected(), {0, 0}, "expected");
  check_shape(repeated->actual(), {2, 3}, "actual");
  CHECK_THROWS_WITH_AS(x.sum({2}), doctest::Contains("[sum] dimension out of range"), IndexError);
  const auto out_of_range = caught<IndexError>([&] { (void)x.max(-3); });
  REQUIRE(out_of_range);
  CHECK_EQ(out_of_range->op(), "max");
  CHECK(out_of_range->dim() == -3);
  CHECK(out_of_range->ndim() == 2);
  const Tensor i = tensor({1, 2, 3});
  CHECK_THROWS_WITH_AS(i.mean(),
                       doctest::Contains("[mean] mean(): could not infer output dtype. Input dtype "
                                         "must be either a floating point or complex dtype. Got: "
                                         "Long"),
                       DTypeError);
  CHECK_THROWS_WITH_AS(i.var(), doctest::Contains("[var] std and var only support floating"),
                       DTypeError);
  const auto std_dtype = caught<DTypeError>([&] { (void)i.std(); });
  REQUIRE(std_dtype);
  CHECK_EQ(std_dtype->op(), "std");
  check_dtypes(std_dtype->dtypes(), {kInt64});
  CHECK_THROWS_WITH_AS(i.norm(),
                       doctest::Contains("[norm] linalg.vector_norm: Expected a "
                                         "floating point or complex tensor as input. "
                                         "Got Long"),
                       DTypeError);
  CHECK_THROWS_WITH_AS(i.logsumexp({0}),
                       doctest::Contains("[logsumexp] expected a floating "
                                         "point input, got int64"),
                       DTypeError);
  CHECK_THROWS_WITH_AS(zeros({0}).max(),
                       doctest::Contains("[max] max(): Expected reduction dim to be specified "
                                         "for input.numel() == 0"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(zeros({2, 0}).min(1),
                       doctest::Contains("[min] min(): Expected reduction dim 1 to have non-zero "
                                         "size"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(zeros({0, 2}).amax({0}),
                       doctest::Contains("[amax] amax(): Expected "
                                         "reduction dim 0"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(zeros({0}).argmax(),
                       doctest::Contains("[argmax] argmax(): Expected "
                                         "reduction dim to be specified"),
                       ShapeError);
  const auto empty_dim = caught<ShapeError>([] { (void)zeros({2, 0}).amin({1}); });
  REQUIRE(empty_dim);
  CHECK_EQ(empty_dim->op(), "amin");
  check_shape(empty_dim->actual(), {2, 0}, "actual");
}

TEST_CASE("a reduction allocates exactly its result and returns no view") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    PolicyAllocator& alloc = allocator_for(dev);
    const Tensor x = ones({64, 100}, dev);
    {
      StatsDelta d(alloc);
      const Tensor s = x.sum({1});
      CHECK_EQ(d.allocations(), 1);
      CHECK_EQ(d.allocated(), rounded(64 * 4));
      CHECK_FALSE(s.is_view());
      CHECK(s.is_contiguous());
    }
    {
      StatsDelta d(alloc);
      const Tensor s = x.t().mean({0}, true);
      CHECK_EQ(d.allocations(), 1);
      CHECK_EQ(d.allocated(), rounded(64 * 4));
      CHECK_EQ(s.sizes(), Shape{1, 64});
    }
    {
      StatsDelta d(alloc);
      auto [v, i] = x.max(0);
      CHECK_EQ(d.allocations(), 2);
      CHECK_EQ(d.allocated(), rounded(100 * 4) + rounded(100 * 8));
      CHECK_FALSE(v.is_view());
      CHECK_FALSE(i.is_view());
    }
    {
      // var/std make two passes instead of a temporary: the peak is the result.
      alloc.reset_peak_stats();
      const int64_t before = alloc.stats().allocated_bytes.all().current;
      const Tensor v = x.var({0});
      CHECK_EQ(alloc.stats().allocated_bytes.all().peak - before, rounded(100 * 4));
    }
    {
      // argmax of a non-contiguous tensor flattens a temporary copy, freed before returning.
      StatsDelta d(alloc);
      const Tensor a = x.t().argmax();
      CHECK_EQ(d.allocations(), 1);
      CHECK_EQ(d.allocated(), rounded(8));
    }
  }
}

}  // TEST_SUITE("engine")
