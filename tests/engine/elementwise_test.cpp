// Elementwise ops: values against hand-computed results, broadcasting, strided inputs, dtype
// promotion, in-place and out= memory behaviour.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "engine/memgrad.h"
#include "tests/support/error_check.h"
#include "tests/support/stats_delta.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::testing::caught;
using memgrad::testing::check_device_error;
using memgrad::testing::check_dtypes;
using memgrad::testing::check_shape;
using memgrad::testing::check_values;
using memgrad::testing::rounded;
using memgrad::testing::StatsDelta;

TEST_SUITE("engine") {

TEST_CASE("binary ops compute elementwise values") {
  for (Device dev : memgrad::testing::devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor a = tensor({1.0, 2.0, 3.0}, dev);
    const Tensor b = tensor({4.0, 5.0, 6.0}, dev);
    check_values(a + b, {3}, {5, 7, 9});
    check_values(a - b, {3}, {-3, -3, -3});
    check_values(a * b, {3}, {4, 10, 18});
    check_values(a / b, {3}, {0.25, 0.4, 0.5});
    check_values(add(a, b, 2), {3}, {9, 12, 15});
    check_values(pow(a, b), {3}, {1, 32, 729});
    check_values(maximum(a, tensor({2.0, 2.0, 2.0}, dev)), {3}, {2, 2, 3});
    check_values(a.add(1.5), {3}, {2.5, 3.5, 4.5});
    check_values(2.0 - a, {3}, {1, 0, -1});
    check_values(6.0 / a, {3}, {6, 3, 2});
  }
}

TEST_CASE("broadcasting aligns shapes from the right") {
  const Tensor a = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});  // (2, 3)
  const Tensor row = tensor({10.0, 20.0, 30.0});                // (3)
  const Tensor col = tensor({100.0, 200.0}).view({2, 1});       // (2, 1)
  check_values(a + row, {2, 3}, {11, 22, 33, 14, 25, 36});
  check_values(a + col, {2, 3}, {101, 102, 103, 204, 205, 206});
  check_values(row + col, {2, 3}, {110, 120, 130, 210, 220, 230});
  const auto e = caught<ShapeError>([&] { (void)(a + tensor({1.0, 2.0})); });
  REQUIRE(e);
  CHECK_EQ(e->op(), "add");
  check_shape(e->lhs(), {2, 3}, "lhs");
  check_shape(e->rhs(), {2}, "rhs");
}

TEST_CASE("unary ops match their formulas") {
  const Tensor x = tensor({-1.0, 0.0, 0.5, 2.0});
  const std::vector<double> xs = {-1.0, 0.0, 0.5, 2.0};
  auto map = [&](auto f) {
    std::vector<double> out;
    for (double v : xs) out.push_back(f(v));
    return out;
  };
  check_values(exp(x), {4}, map([](double v) { return std::exp(v); }), 1e-6);
  check_values(tanh(x), {4}, map([](double v) { return std::tanh(v); }), 1e-6);
  check_values(sigmoid(x), {4}, map([](double v) { return 1 / (1 + std::exp(-v)); }), 1e-6);
  check_values(relu(x), {4}, {0, 0, 0.5, 2});
  check_values(abs(x), {4}, {1, 0, 0.5, 2});
  check_values(sign(x), {4}, {-1, 0, 1, 1});
  check_values(neg(x), {4}, {1, 0, -0.5, -2});
  check_values(square(x), {4}, {1, 0, 0.25, 4});
  check_values(gelu(x), {4},
               map([](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }), 1e-6);
  check_values(gelu(x, true), {4}, map([](double v) {
                 return 0.5 * v * (1 + std::tanh(0.7978845608 * (v + 0.044715 * v * v * v)));
               }),
               1e-6);
  check_values(silu(x), {4}, map([](double v) { return v / (1 + std::exp(-v)); }), 1e-6);
  check_values(clamp(x, -0.5, 1.0), {4}, {-0.5, 0, 0.5, 1});
  check_values(clamp(x, std::nullopt, 0.0), {4}, {-1, 0, 0, 0});
}

TEST_CASE(
    "the CPU's vectorised contiguous path agrees with the shared formulas of the strided path") {
  // On contiguous float rows, exp, log, sqrt, rsqrt, tanh, sigmoid, silu and tanh-GELU run as
  // Eigen array expressions (kernels/cpu/unary.cpp, eigen_unary); any other layout runs
  // kernels/elementwise_formulas.h, the code the CUDA kernels run. The two differ only in whose
  // exp, log and tanh they call, so they agree within a few units in the last place: relative
  // 4e-7 in float32 (measured 2.4e-7 at most, tanh) and 1e-15 in float64 (3.6e-16). tanh-GELU's
  // 1 + tanh(u) cancels for negative x, and Eigen's float tanh is exactly -1 from u = -7.9 on
  // (x < -4.85), where libm's is not yet: there the fast path gives -0 for values down to
  // -5.8e-7. Its differences are measured against max(|y|, 1) instead, within 1e-6 in float32.
  struct Case {
    const char* name;
    Tensor (*op)(const Tensor&);
    bool positive;  // log, sqrt and rsqrt: inputs in (0, 50]
    bool cancels;   // relative to max(|y|, 1)
  };
  const Case cases[] = {
      {"exp", [](const Tensor& x) { return exp(x); }, false, false},
      {"log", [](const Tensor& x) { return log(x); }, true, false},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, true, false},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, true, false},
      {"tanh", [](const Tensor& x) { return tanh(x); }, false, false},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, false, false},
      {"silu", [](const Tensor& x) { return silu(x); }, false, false},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, true); }, false, true},
  };
  for (const DType dtype : {kFloat32, kFloat64}) {
    for (const Case& c : cases) {
      const double tolerance = dtype == kFloat64 ? 1e-15 : c.cancels ? 1e-6 : 4e-7;
      const Tensor x =
          (c.positive ? linspace(0.01, 50.0, 4001) : linspace(-12.0, 12.0, 4001)).to(dtype);
      const Tensor strided = stack({x, x}, 1).select(1, 0);  // the same values, stride 2
      REQUIRE_FALSE(strided.is_contiguous());
      const std::vector<double> fast = c.op(x).to_vector<double>();
      const std::vector<double> shared = c.op(strided).to_vector<double>();
      double worst = 0.0;
      size_t worst_at = 0;
      for (size_t i = 0; i < fast.size(); ++i) {
        double scale = std::max(std::abs(fast[i]), std::abs(shared[i]));
        if (c.cancels) scale = std::max(scale, 1.0);
        const double difference = scale > 0.0 ? std::abs(fast[i] - shared[i]) / scale : 0.0;
        if (difference > worst) worst = difference, worst_at = i;
      }
      CHECK_MESSAGE(worst <= tolerance,
                    fmt::format("{} in {}: x = {}: contiguous {} vs strided {} ({:.3g} > {:.3g})",
                                c.name, dtype_name(dtype), x[int64_t(worst_at)].item<double>(),
                                fast[worst_at], shared[worst_at], worst, tolerance));
    }
  }
}

TEST_CASE("mixed dtypes promote like PyTorch") {
  const Tensor i = tensor({1, 2, 3});
  const Tensor f = tensor({0.5, 0.5, 0.5});
  CHECK_EQ(i.dtype(), kInt64);
  CHECK_EQ((i + f).dtype(), kFloat32);
  check_values(i + f, {3}, {1.5, 2.5, 3.5});
  CHECK_EQ((i + 2).dtype(), kInt64);
  CHECK_EQ((i + 2.5).dtype(), kFloat32);
  CHECK_EQ((i / i).dtype(), kFloat32);  // true division
  CHECK_EQ(exp(i).dtype(), kFloat32);
  CHECK_EQ((f.to(kFloat64) + f).dtype(), kFloat64);
  CHECK_EQ((f.to(kFloat16) + f).dtype(), kFloat32);
  CHECK_EQ(f.gt(0.1).dtype(), kBool);
  Tensor ii = tensor({1, 2});
  // The fields: the result's dtype, then the dtype of the tensor written in place.
  const auto e = caught<DTypeError>([&] { ii.add_(tensor({0.5, 0.5})); });
  REQUIRE(e);
  CHECK_EQ(e->op(), "add_");
  check_dtypes(e->dtypes(), {kFloat32, kInt64});
  const auto scalar = caught<DTypeError>([&] { ii.mul_(0.5); });
  REQUIRE(scalar);
  CHECK_EQ(scalar->op(), "mul_");
  check_dtypes(scalar->dtypes(), {kFloat32, kInt64});
}

TEST_CASE("strided inputs: transposed, sliced with a step, expanded") {
  const Tensor base = arange(12, kFloat32).view({3, 4});  // 0..11
  const Tensor tr = base.t();                             // (4, 3), strides (1, 4)
  check_values(tr + 0.0, {4, 3}, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  const Tensor stepped = base.slice(1, 0, 4, 2);  // columns 0 and 2
  check_values(stepped * 2.0, {3, 2}, {0, 4, 8, 12, 16, 20});
  const Tensor ex = tensor({1.0, 2.0}).view({2, 1}).expand({2, 3});
  check_values(exp(ex).log(), {2, 3}, {1, 1, 1, 2, 2, 2}, 1e-6);
  check_values(tr * tr, {4, 3}, {0, 16, 64, 1, 25, 81, 4, 36, 100, 9, 49, 121});
}

TEST_CASE("in-place ops allocate nothing and bump the version") {
  Tensor x = ones({64, 64});
  const Tensor y = ones({64});
  StatsDelta delta(allocator_for(kCPU));
  const uint32_t v0 = x.version();
  x.add_(y);
  x.mul_(2.0);
  x.exp_();
  x.relu_();
  x.clamp_(0.0, 10.0);
  x.zero_();
  x.fill_(3.0);
  CHECK_EQ(delta.allocated(), 0);
  CHECK_EQ(delta.allocations(), 0);
  CHECK_EQ(x.version(), v0 + 7);
  check_values(x.slice(0, 0, 1).slice(1, 0, 2), {1, 2}, {3, 3});
}

TEST_CASE("out= writes into a preallocated tensor without allocating") {
  const Tensor a = ones({128});
  const Tensor b = ones({128});
  Tensor out = empty({128});
  StatsDelta delta(allocator_for(kCPU));
  add_out(out, a, b);
  mul_out(out, out, b);
  exp_out(out, a);
  CHECK_EQ(delta.allocations(), 0);
  CHECK_EQ(out.to_vector<float>()[0], doctest::Approx(std::exp(1.0)).epsilon(1e-6));
}

TEST_CASE("mul_out by a scalar writes a scaled copy in one pass, into a view without allocating") {
  const Tensor a = arange(0, 6).to(kFloat32).view({2, 3});
  Tensor flat = zeros({8});
  Tensor out = flat.narrow(0, 1, 6).view({2, 3});
  const int64_t v0 = flat.version();
  StatsDelta delta(allocator_for(kCPU));
  mul_out(out, a.t().contiguous().t(), 0.5);  // a strided input, read in a's element order
  CHECK_EQ(delta.allocations(), 0);
  CHECK_EQ(flat.version(), v0 + 1);
  CHECK_EQ(flat.to_vector<float>(), std::vector<float>{0, 0, 0.5f, 1, 1.5f, 2, 2.5f, 0});
  Tensor wrong = flat.narrow(0, 0, 4);
  CHECK_THROWS_AS(mul_out(wrong, a, 2.0), ShapeError);  // a view of another shape
  Tensor ints = zeros({2, 3}, TensorOptions(kInt64));
  CHECK_THROWS_AS(mul_out(ints, a, 2.0), DTypeError);
}

TEST_CASE("an out-of-place op allocates exactly its result, rounded to 512 bytes") {
  const Tensor a = ones({1000});
  StatsDelta delta(allocator_for(kCPU));
  Tensor c = a + a;
  CHECK_EQ(delta.allocated(), rounded(4000));
  c = Tensor();
  CHECK_EQ(delta.allocated(), 0);  // the last handle dropped: the block is back in the cache
}

TEST_CASE("ops on different devices throw a DeviceError naming both") {
  const Tensor a = ones({2});
  const Tensor b = ones({2}, Device("sim:0"));
  check_device_error([&] { (void)(a + b); }, "add", {"cpu", "sim:0"});
}

TEST_CASE("where selects by a bool condition") {
  const Tensor c = tensor({1.0, -1.0, 2.0}).gt(0.0);
  check_values(where(c, tensor({1.0, 2.0, 3.0}), tensor({9.0, 9.0, 9.0})), {3}, {1, 9, 3});
  const auto e = caught<DTypeError>([] { (void)where(tensor({1.0}), ones({1}), ones({1})); });
  REQUIRE(e);
  CHECK_EQ(e->op(), "where");
  check_dtypes(e->dtypes(), {kFloat32});
}

}  // TEST_SUITE("engine")
