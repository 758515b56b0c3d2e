// Factories (engine/factories.h): the values, dtype and device of every factory, the exact bytes
// each allocates, the dtype inference rules, the reproducibility of the random ones (a draw
// depends only on the generator's seed and offset, and advances the offset by one Philox counter
// per four values), their distributions (seeded, so every run checks the same numbers), and the
// errors with their types and messages.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/memgrad.h"
#include "tests/support/error_check.h"
#include "tests/support/stats_delta.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::testing::check_device_error;
using memgrad::testing::check_value_error;
using memgrad::testing::check_values;
using memgrad::testing::devices_under_test;
using memgrad::testing::rounded;
using memgrad::testing::StatsDelta;

namespace {

TensorOptions on(Device device, DType dtype = kFloat32) {
  return TensorOptions(dtype).with_device(device);
}

// Values the CUDA backend computes with other instructions (sin, cos, log) may differ from the
// CPU's in the last bit; the CPU and sim devices run the same kernels and must agree exactly.
double same_values_tolerance(Device device) { return device.is_cuda() ? 1e-6 : 0.0; }

// Mean and population variance of `v`.
std::pair<double, double> moments(const std::vector<double>& v) {
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double var = 0.0;
  for (double x : v) var += (x - mean) * (x - mean);
  return {mean, var / static_cast<double>(v.size())};
}

std::vector<double> slice(const std::vector<double>& v, size_t begin, size_t end) {
  return {v.begin() + static_cast<std::ptrdiff_t>(begin),
          v.begin() + static_cast<std::ptrdiff_t>(end)};
}

// Restores the CPU's default generator when the scope ends.
class DefaultGeneratorScope {
 public:
  DefaultGeneratorScope() : saved_(default_generator(kCPU).get_state()) {}
  ~DefaultGeneratorScope() { default_generator(kCPU).set_state(saved_); }
  DefaultGeneratorScope(const DefaultGeneratorScope&) = delete;
  DefaultGeneratorScope& operator=(const DefaultGeneratorScope&) = delete;

 private:
  GeneratorState saved_;
};

}  // namespace

TEST_SUITE("engine") {

// ---- constant factories ----

TEST_CASE("zeros, ones and full fill a contiguous tensor of the requested dtype and device") {
  for (Device dev : devices_under_test()) {
    for (DType dtype : {kFloat32, kFloat64, kFloat16, kInt64, kBool}) {
      CAPTURE(dev.str());
      CAPTURE(std::string(dtype_name(dtype)));
      const Scalar value = dtype == kBool ? Scalar(true) : Scalar(3);
      const double expected = dtype == kBool ? 1.0 : 3.0;
      const Tensor z = zeros({2, 3}, on(dev, dtype));
      const Tensor o = ones({2, 3}, on(dev, dtype));
      const Tensor f = full({2, 3}, value, on(dev, dtype));
      for (const Tensor* t : {&z, &o, &f}) {
        CHECK_EQ(t->dtype(), dtype);
        CHECK_EQ(t->device(), dev);
        CHECK(t->is_contiguous());
        CHECK_FALSE(t->is_view());
      }
      check_values(z, {2, 3}, std::vector<double>(6, 0.0), 0.0);
      check_values(o, {2, 3}, std::vector<double>(6, 1.0), 0.0);
      check_values(f, {2, 3}, std::vector<double>(6, expected), 0.0);
    }
  }
}

TEST_CASE("empty, zeros and ones are float32 on the CPU unless options say otherwise") {
  for (const Tensor& t : {empty({4}), zeros({4}), ones({4}), empty({})}) {
    CHECK_EQ(t.dtype(), kFloat32);
    CHECK_EQ(t.device(), kCPU);
    CHECK_FALSE(t.requires_grad());
  }
  CHECK_EQ(empty({}).dim(), 0);
  CHECK_EQ(empty({}).numel(), 1);
  CHECK_EQ(empty({2, 0, 3}).numel(), 0);
  CHECK_EQ(empty({2, 0, 3}).sizes(), Shape{2, 0, 3});
}

TEST_CASE("full infers bool from a bool, int64 from an integer and float32 from a floating value") {
  const Tensor b = full({2}, true);
  CHECK_EQ(b.dtype(), kBool);
  CHECK_EQ(b.to_vector<bool>(), std::vector<bool>{true, true});
  const Tensor i = full({2}, 7);
  CHECK_EQ(i.dtype(), kInt64);
  CHECK_EQ(i.to_vector<int64_t>(), std::vector<int64_t>{7, 7});
  const Tensor f = full({2}, 2.5);
  CHECK_EQ(f.dtype(), kFloat32);
  CHECK_EQ(f.to_vector<float>(), std::vector<float>{2.5f, 2.5f});
  // A dtype in the options wins.
  CHECK_EQ(full({2}, 7, kFloat64).dtype(), kFloat64);
  CHECK_EQ(full({2}, 2.5, kFloat64).to_vector<double>(), std::vector<double>{2.5, 2.5});
  // A value the dtype cannot hold is a ValueError naming the op.
  check_value_error([] { (void)full({2}, NAN, kInt64); }, "full", "value", "nan");
}

TEST_CASE("scalar_tensor makes a 0-d tensor whose dtype follows the value") {
  const Tensor f = scalar_tensor(2.5);
  CHECK_EQ(f.dim(), 0);
  CHECK_EQ(f.numel(), 1);
  CHECK_EQ(f.dtype(), kFloat32);
  CHECK_EQ(f.item<double>(), 2.5);
  CHECK_EQ(scalar_tensor(7).dtype(), kInt64);
  CHECK_EQ(scalar_tensor(7).item<int64_t>(), 7);
  CHECK_EQ(scalar_tensor(true).dtype(), kBool);
  CHECK_EQ(scalar_tensor(7, kFloat64).dtype(), kFloat64);
}

TEST_CASE("a negative size is a ShapeError naming the op and the sizes") {
  const std::vector<std::pair<const char*, std::function<Tensor()>>> cases = {
      {"[empty] negative dimension -2 in size [3, -2]",
       [] {
         return empty({3, -2});
       }},
      {"[zeros] negative dimension -2 in size [3, -2]",
       [] {
         return zeros({3, -2});
       }},
      {"[ones] negative dimension -1 in size [-1]", [] { return ones({-1}); }},
      {"[full] negative dimension -1 in size [-1]", [] { return full({-1}, 1.0); }},
      {"[rand] negative dimension -4 in size [-4, 2]",
       [] {
         return rand({-4, 2});
       }},
      {"[randn] negative dimension -4 in size [-4, 2]",
       [] {
         return randn({-4, 2});
       }},
      {"[randint] negative dimension -1 in size [-1]", [] { return randint(0, 3, {-1}); }},
      {"[eye] n must be >= 0, got -1", [] { return eye(-1); }},
  };
  for (const auto& [message, make] : cases) {
    CAPTURE(message);
    CHECK_THROWS_WITH_AS(make(), doctest::Contains(message), ShapeError);
  }
}

// ---- memory ----

TEST_CASE("every factory allocates one block of the rounded result size on the requested device") {
  const std::vector<std::pair<const char*, std::function<Tensor(Device)>>> factories = {
      {"empty",
       [](Device d) {
         return empty({3, 50}, on(d));
       }},
      {"zeros",
       [](Device d) {
         return zeros({3, 50}, on(d, kFloat64));
       }},
      {"ones", [](Device d) { return ones({700}, on(d, kFloat16)); }},
      {"full",
       [](Device d) {
         return full({2, 3}, 7, TensorOptions(d));
       }},
      {"scalar_tensor", [](Device d) { return scalar_tensor(3.5, TensorOptions(d)); }},
      {"arange", [](Device d) { return arange(0, 300, 1, TensorOptions(d)); }},
      {"arange float", [](Device d) { return arange(0.0, 1.0, 0.01, TensorOptions(d)); }},
      {"linspace", [](Device d) { return linspace(0, 1, 129, TensorOptions(d)); }},
      {"eye", [](Device d) { return eye(20, 30, TensorOptions(d)); }},
      {"rand", [](Device d) { return rand({130}, TensorOptions(d)); }},
      {"randn",
       [](Device d) {
         return randn({6, 6}, on(d, kFloat64));
       }},
      {"randint", [](Device d) { return randint(0, 5, {9}, TensorOptions(d)); }},
      {"from_vector",
       [](Device d) { return from_vector(std::vector<double>(200, 1.5), {}, on(d, kFloat32)); }},
      {"tensor",
       [](Device d) {
         return tensor({1.0, 2.0, 3.0}, TensorOptions(d));
       }},
  };
  for (Device dev : devices_under_test()) {
    for (const auto& [name, make] : factories) {
      CAPTURE(dev.str());
      CAPTURE(name);
      StatsDelta d(allocator_for(dev));
      StatsDelta cpu(allocator_for(kCPU));
      const Tensor t = make(dev);
      CHECK_EQ(t.device(), dev);
      CHECK_EQ(d.allocated(), rounded(t.nbytes()));
      CHECK_EQ(d.allocations(), 1);
      CHECK_EQ(d.requested(), static_cast<int64_t>(t.nbytes()));
      // Host-side staging (arange, linspace and from_vector fill on the CPU) is freed.
      if (dev != kCPU) CHECK_EQ(cpu.allocated(), 0);
    }
  }
}

TEST_CASE("a factory of no elements allocates nothing") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    StatsDelta d(allocator_for(dev));
    const Tensor a = zeros({4, 0}, TensorOptions(dev));
    const Tensor b = arange(3, 3, 1, TensorOptions(dev));
    const Tensor c = linspace(0, 1, 0, TensorOptions(dev));
    const Tensor e = rand({0}, TensorOptions(dev));
    const Tensor f = eye(0, 0, TensorOptions(dev));
    CHECK_EQ(d.allocated(), 0);
    CHECK_EQ(d.allocations(), 0);
    CHECK_EQ(b.numel() + c.numel() + e.numel() + f.numel(), 0);
    CHECK_EQ(f.sizes(), Shape{0, 0});
  }
}

// ---- *_like ----

TEST_CASE("the _like factories take sizes, dtype and device from their argument") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor like = arange(0, 6, 1, on(dev, kInt64)).reshape({2, 3});
    Generator g(11);
    const std::vector<std::pair<const char*, Tensor>> made = {
        {"empty_like", empty_like(like)},
        {"zeros_like", zeros_like(like)},
        {"ones_like", ones_like(like)},
        {"full_like", full_like(like, 4)},
        {"rand_like", rand_like(full({2, 3}, 0.0, on(dev, kFloat64)), &g)},
        {"randn_like", randn_like(full({2, 3}, 0.0, on(dev, kFloat64)), &g)},
    };
    for (const auto& [name, t] : made) {
      CAPTURE(name);
      CHECK_EQ(t.sizes(), Shape{2, 3});
      CHECK_EQ(t.device(), dev);
      CHECK_FALSE(t.shares_storage_with(like));
    }
    CHECK_EQ(made[0].second.dtype(), kInt64);
    CHECK_EQ(made[1].second.to_vector<int64_t>(), std::vector<int64_t>(6, 0));
    CHECK_EQ(made[2].second.to_vector<int64_t>(), std::vector<int64_t>(6, 1));
    CHECK_EQ(made[3].second.to_vector<int64_t>(), std::vector<int64_t>(6, 4));
    CHECK_EQ(made[4].second.dtype(), kFloat64);
    CHECK_EQ(made[5].second.dtype(), kFloat64);
    // A dtype given to the constant ones wins.
    CHECK_EQ(zeros_like(like, kFloat16).dtype(), kFloat16);
    CHECK_EQ(ones_like(like, kBool).dtype(), kBool);
    CHECK_EQ(empty_like(like, kFloat64).dtype(), kFloat64);
    // full_like keeps the argument's dtype and checks the value against it.
    CHECK_THROWS_AS(full_like(like, INFINITY), ValueError);
  }
}

TEST_CASE("rand_like and randn_like draw what rand and randn draw from the same generator") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor like = zeros({3, 5}, on(dev, kFloat64));
    Generator a(21), b(21);
    CHECK_EQ(rand_like(like, &a).to_vector<double>(),
             rand({3, 5}, on(dev, kFloat64), &b).to_vector<double>());
    CHECK_EQ(randn_like(like, &a).to_vector<double>(),
             randn({3, 5}, on(dev, kFloat64), &b).to_vector<double>());
    CHECK_EQ(a.get_state(), b.get_state());
  }
}

// ---- ranges ----

TEST_CASE("arange counts from start by step below end, int64 for integer arguments") {
  const Tensor a = arange(5);
  CHECK_EQ(a.dtype(), kInt64);
  CHECK_EQ(a.to_vector<int64_t>(), std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK_EQ(arange(2, 11, 3).to_vector<int64_t>(), std::vector<int64_t>{2, 5, 8});
  CHECK_EQ(arange(5, 0, -2).to_vector<int64_t>(), std::vector<int64_t>{5, 3, 1});
  CHECK_EQ(arange(-3, -1).to_vector<int64_t>(), std::vector<int64_t>{-3, -2});
  // An empty range when start == end.
  CHECK_EQ(arange(4, 4).numel(), 0);
  CHECK_EQ(arange(4, 4).dtype(), kInt64);
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor t = arange(1, 7, 2, TensorOptions(dev));
    CHECK_EQ(t.device(), dev);
    check_values(t, {3}, {1, 3, 5}, 0.0);
  }
}

TEST_CASE(
    "arange is float32 when any argument is floating, with ceil((end - start) / step) values") {
  const Tensor q = arange(0.0, 1.0, 0.25);
  CHECK_EQ(q.dtype(), kFloat32);
  CHECK_EQ(q.to_vector<float>(), std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f});
  // ceil(1.5 / 0.5) = 3 values: the end is excluded.
  CHECK_EQ(arange(1, 2.5, 0.5).to_vector<float>(), std::vector<float>{1.0f, 1.5f, 2.0f});
  // ceil(1.6 / 0.5) = 4: a partial last step still gives a value.
  CHECK_EQ(arange(0, 1.6, 0.5).to_vector<float>(), std::vector<float>{0.0f, 0.5f, 1.0f, 1.5f});
  CHECK_EQ(arange(0, 3, 0.5).dtype(), kFloat32);
  CHECK_EQ(arange(2.0).to_vector<float>(), std::vector<float>{0.0f, 1.0f});
  // Value i is start + i * step, in float64 before the conversion: no accumulated error.
  const std::vector<double> tenths = arange(0.0, 1.0, 0.1, kFloat64).to_vector<double>();
  REQUIRE_EQ(tenths.size(), 10);
  for (size_t i = 0; i < tenths.size(); ++i) {
    CAPTURE(i);
    CHECK_EQ(tenths[i], 0.1 * static_cast<double>(i));
  }
  // A dtype in the options wins.
  CHECK_EQ(arange(0, 4, 1, kFloat64).dtype(), kFloat64);
  CHECK_EQ(arange(0.0, 4.0, 1.5, kInt64).to_vector<int64_t>(), std::vector<int64_t>{0, 1, 3});
}

TEST_CASE("arange with step 0, a wrong-way step or a non-finite bound is a ValueError") {
  check_value_error([] { (void)arange(0, 5, 0); }, "arange", "step", "0");
  check_value_error([] { (void)arange(0.0, 1.0, 0.0); }, "arange", "step", "0");
  check_value_error([] { (void)arange(0, 5, -1); }, "arange", "end", "5");
  CHECK_THROWS_AS(arange(5, 0, 1), ValueError);
  CHECK_THROWS_AS(arange(-1), ValueError);
  check_value_error([] { (void)arange(0.0, NAN); }, "arange", "end", "nan");
  CHECK_THROWS_AS(arange(-INFINITY, 0.0), ValueError);
}

TEST_CASE("linspace gives steps evenly spaced values from start to end, both included") {
  // (1 - 0) / 4 = 0.25 apart.
  const Tensor q = linspace(0, 1, 5);
  CHECK_EQ(q.dtype(), kFloat32);
  CHECK_EQ(q.to_vector<float>(), std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f, 1.0f});
  CHECK_EQ(linspace(-2, 2, 3).to_vector<float>(), std::vector<float>{-2.0f, 0.0f, 2.0f});
  CHECK_EQ(linspace(3, -3, 4).to_vector<float>(), std::vector<float>{3.0f, 1.0f, -1.0f, -3.0f});
  // Filled from both ends (PyTorch's order): the first half is start + i * step, the second
  // half end - (steps - 1 - i) * step, so the last value is exactly `end`.
  const double step = (0.4 - 0.1) / 6;
  const std::vector<double> v = linspace(0.1, 0.4, 7, kFloat64).to_vector<double>();
  const std::vector<double> expected = {
      0.1, 0.1 + step, 0.1 + 2 * step, 0.4 - 3 * step, 0.4 - 2 * step, 0.4 - step, 0.4};
  CHECK_EQ(v, expected);
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    check_values(linspace(0, 10, 5, on(dev, kInt64)), {5}, {0, 2, 5, 7, 10}, 0.0);
    CHECK_EQ(linspace(0, 10, 5, on(dev, kInt64)).dtype(), kInt64);
  }
}

TEST_CASE(
    "linspace of one step is the start, of zero steps empty, of negative steps a ValueError") {
  // PyTorch and NumPy: linspace(start, end, 1) == [start].
  CHECK_EQ(linspace(-1, 1, 1).to_vector<float>(), std::vector<float>{-1.0f});
  CHECK_EQ(linspace(5, 5, 1).to_vector<float>(), std::vector<float>{5.0f});
  CHECK_EQ(linspace(0, 1, 0).sizes(), Shape{0});
  CHECK_EQ(linspace(0, 1, 2).to_vector<float>(), std::vector<float>{0.0f, 1.0f});
  check_value_error([] { (void)linspace(0, 1, -1); }, "linspace", "steps", "-1");
}

TEST_CASE("eye puts ones on the main diagonal of an n x m matrix, square when m is negative") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    check_values(eye(3, -1, TensorOptions(dev)), {3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1}, 0.0);
    check_values(eye(2, 3, TensorOptions(dev)), {2, 3}, {1, 0, 0, 0, 1, 0}, 0.0);
    check_values(eye(3, 2, TensorOptions(dev)), {3, 2}, {1, 0, 0, 1, 0, 0}, 0.0);
    check_values(eye(1, -1, on(dev, kInt64)), {1, 1}, {1}, 0.0);
    CHECK_EQ(eye(2, -1, on(dev, kInt64)).dtype(), kInt64);
    CHECK_EQ(eye(2, -1, on(dev, kBool)).to_vector<bool>(),
             std::vector<bool>{true, false, false, true});
  }
  CHECK_EQ(eye(4).dtype(), kFloat32);
  CHECK(eye(4).is_contiguous());
  CHECK_EQ(eye(4).sum().item<double>(), 4.0);
  CHECK_EQ(eye(2, 0).sizes(), Shape{2, 0});
}

// ---- random ----

TEST_CASE("the same seed gives the same random values on every device") {
  Generator reference(1234);
  const std::vector<double> u = rand({10}, {}, &reference).to_vector<double>();
  const std::vector<double> n = randn({10}, {}, &reference).to_vector<double>();
  const std::vector<double> k = randint(-50, 50, {10}, {}, &reference).to_vector<double>();
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    Generator g(1234);
    const double tol = same_values_tolerance(dev);
    check_values(rand({10}, TensorOptions(dev), &g), {10}, u, 0.0);
    check_values(randn({10}, TensorOptions(dev), &g), {10}, n, tol);
    check_values(randint(-50, 50, {10}, TensorOptions(dev), &g), {10}, k, 0.0);
    CHECK_EQ(g.get_state(), reference.get_state());
  }
}

TEST_CASE("a draw of n values advances the generator by ceil(n / 4) counters, so draws tile") {
  // Value i of a draw at offset o comes from counter o + i / 4: consecutive draws of multiples of
  // four values are one long draw cut in pieces, and a draw of 5 values skips 3 of its counter.
  Generator whole(7);
  const std::vector<double> all = rand({16}, {}, &whole).to_vector<double>();
  CHECK_EQ(whole.get_state(), GeneratorState{7, 4});

  Generator parts(7);
  check_values(rand({4}, {}, &parts), {4}, slice(all, 0, 4), 0.0);
  CHECK_EQ(parts.get_state().offset, 1);
  check_values(rand({5}, {}, &parts), {5}, slice(all, 4, 9), 0.0);
  CHECK_EQ(parts.get_state().offset, 3);
  check_values(rand({1}, {}, &parts), {1}, slice(all, 12, 13), 0.0);
  CHECK_EQ(parts.get_state().offset, 4);
  // No values, no counters.
  (void)rand({0}, {}, &parts);
  CHECK_EQ(parts.get_state().offset, 4);

  // randn's Box-Muller pairs stay inside a counter, so it tiles the same way.
  Generator normal_whole(9), normal_parts(9);
  const std::vector<double> normals = randn({8}, kFloat64, &normal_whole).to_vector<double>();
  check_values(randn({4}, kFloat64, &normal_parts), {4}, slice(normals, 0, 4), 0.0);
  check_values(randn({4}, kFloat64, &normal_parts), {4}, slice(normals, 4, 8), 0.0);
}

TEST_CASE("another seed or a later generator state gives different random values") {
  Generator a(1), b(2);
  const std::vector<double> from_a = rand({64}, kFloat64, &a).to_vector<double>();
  const std::vector<double> from_b = rand({64}, kFloat64, &b).to_vector<double>();
  const std::vector<double> next_a = rand({64}, kFloat64, &a).to_vector<double>();
  int same_seed_diff = 0, same_state = 0;
  for (size_t i = 0; i < from_a.size(); ++i) {
    same_seed_diff += from_a[i] == from_b[i] ? 1 : 0;
    same_state += from_a[i] == next_a[i] ? 1 : 0;
  }
  CHECK_EQ(same_seed_diff, 0);
  CHECK_EQ(same_state, 0);
  // Back to a saved state: the same values again.
  Generator c(1);
  const GeneratorState start = c.get_state();
  CHECK_EQ(rand({64}, kFloat64, &c).to_vector<double>(), from_a);
  c.set_state(start);
  CHECK_EQ(rand({64}, kFloat64, &c).to_vector<double>(), from_a);
  c.manual_seed(1);
  CHECK_EQ(c.get_state(), start);
}

TEST_CASE("without a generator the factories draw from the device's default generator") {
  const DefaultGeneratorScope restore;
  default_generator(kCPU).set_state({99, 5});
  const std::vector<double> drawn = rand({8}).to_vector<double>();
  CHECK_EQ(default_generator(kCPU).get_state(), GeneratorState{99, 7});
  Generator g(99);
  g.set_state({99, 5});
  CHECK_EQ(rand({8}, {}, &g).to_vector<double>(), drawn);
}

TEST_CASE("rand is uniform in [0, 1) with mean 1/2 and variance 1/12") {
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(std::string(dtype_name(dtype)));
    Generator g(2024);
    const Tensor t = rand({100000}, dtype, &g);
    CHECK_EQ(t.dtype(), dtype);
    const std::vector<double> v = t.to_vector<double>();
    CHECK_GE(*std::min_element(v.begin(), v.end()), 0.0);
    CHECK_LT(*std::max_element(v.begin(), v.end()), 1.0);
    const auto [mean, var] = moments(v);
    // Standard error of the mean: sqrt(1/12 / 1e5) ~ 0.0009; of the variance ~ 0.00024.
    CHECK(std::abs(mean - 0.5) < 0.005);
    CHECK(std::abs(var - 1.0 / 12.0) < 0.002);
    // Ten equal bins of ~10000 values (standard deviation ~95).
    std::vector<int> bins(10, 0);
    for (double x : v) ++bins[static_cast<size_t>(x * 10.0)];
    for (size_t i = 0; i < bins.size(); ++i) {
      CAPTURE(i);
      CHECK(std::abs(bins[i] - 10000) < 600);
    }
  }
}

// Drawn from 24 bits and rounded to float16's 11 significant bits, about 1 value in 4096 would
// become 1.0; float16 draws 11 bits, as PyTorch does (kernels/random_formulas.h).
TEST_CASE("rand in float16 stays below 1") {
  Generator g(5);
  const std::vector<double> v = rand({100000}, kFloat16, &g).to_vector<double>();
  CHECK_LT(*std::max_element(v.begin(), v.end()), 1.0);
  CHECK_GE(*std::min_element(v.begin(), v.end()), 0.0);
}

TEST_CASE("randn has mean 0 and standard deviation 1") {
  Generator g(77);
  const Tensor t = randn({100000}, {}, &g);
  CHECK_EQ(t.dtype(), kFloat32);
  const std::vector<double> v = t.to_vector<double>();
  const auto [mean, var] = moments(v);
  // Standard error of the mean ~ 0.0032, of the standard deviation ~ 0.0022.
  CHECK(std::abs(mean) < 0.02);
  CHECK(std::abs(std::sqrt(var) - 1.0) < 0.012);
  // 68.27% of a standard normal lies within one standard deviation (standard error ~ 0.0015).
  const auto within = std::count_if(v.begin(), v.end(), [](double x) { return std::abs(x) < 1.0; });
  CHECK(std::abs(static_cast<double>(within) / 1e5 - 0.6827) < 0.008);
  // Symmetric: as many draws below 0 as above (standard error ~ 160).
  const auto negative = std::count_if(v.begin(), v.end(), [](double x) { return x < 0.0; });
  CHECK(std::abs(static_cast<double>(negative) - 50000.0) < 800.0);
}

TEST_CASE("randint draws int64 integers in [low, high) and reaches every one") {
  Generator g(3);
  const Tensor t = randint(-3, 4, {7000}, {}, &g);
  CHECK_EQ(t.dtype(), kInt64);
  std::vector<int> counts(7, 0);
  for (int64_t x : t.to_vector<int64_t>()) {
    REQUIRE(x >= -3);
    REQUIRE(x < 4);
    ++counts[static_cast<size_t>(x + 3)];
  }
  // ~1000 each (standard deviation ~29).
  for (size_t i = 0; i < counts.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(counts[i] - 1000) < 150);
  }
  // A dtype in the options: the same integers as floats.
  Generator h(3);
  const std::vector<double> as_float = randint(-3, 4, {7000}, kFloat32, &h).to_vector<double>();
  const std::vector<double> as_int = t.to_vector<double>();
  CHECK_EQ(as_float, as_int);
  // The widest range allowed, 2^32 values.
  Generator w(4);
  const std::vector<int64_t> wide =
      randint(0, int64_t{1} << 32, {1000}, {}, &w).to_vector<int64_t>();
  CHECK_GE(*std::min_element(wide.begin(), wide.end()), 0);
  CHECK_LT(*std::max_element(wide.begin(), wide.end()), int64_t{1} << 32);
  CHECK_GT(*std::max_element(wide.begin(), wide.end()), int64_t{1} << 31);
}

TEST_CASE("randint with an empty or wider than 2^32 range is a ValueError") {
  check_value_error([] { (void)randint(5, 5, {2}); }, "randint", "high", "5");
  CHECK_THROWS_AS(randint(5, 1, {2}), ValueError);
  check_value_error([] { (void)randint(0, (int64_t{1} << 32) + 1, {2}); }, "randint", "high",
                    "4294967297");
}

TEST_CASE("uniform_ and normal_ fill in place from the default generator, also through a view") {
  const DefaultGeneratorScope restore;
  default_generator(kCPU).set_state({42, 0});
  Tensor x = zeros({1000});
  const void* data = x.data_ptr();
  CHECK_EQ(&x.uniform_(2.0, 3.0), &x);
  CHECK_EQ(x.data_ptr(), data);
  const std::vector<double> u = x.to_vector<double>();
  CHECK_GE(*std::min_element(u.begin(), u.end()), 2.0);
  CHECK_LT(*std::max_element(u.begin(), u.end()), 3.0);
  CHECK(std::abs(moments(u).first - 2.5) < 0.05);
  CHECK_EQ(default_generator(kCPU).get_state().offset, 250);
  // The same state, the same values.
  default_generator(kCPU).set_state({42, 0});
  Tensor y = zeros({1000});
  y.uniform_(2.0, 3.0);
  CHECK_EQ(y.to_vector<double>(), u);

  // A non-contiguous view receives the values a contiguous tensor of its shape would, in its
  // own element order, and the bytes of the temporary are given back.
  default_generator(kCPU).set_state({43, 0});
  Tensor contiguous = zeros({6, 4});
  contiguous.uniform_(-1.0, 1.0);
  default_generator(kCPU).set_state({43, 0});
  const Tensor base = zeros({4, 6});
  Tensor view = base.transpose(0, 1);
  REQUIRE_FALSE(view.is_contiguous());
  StatsDelta d(allocator_for(kCPU));
  view.uniform_(-1.0, 1.0);
  CHECK_EQ(d.allocated(), 0);
  CHECK_EQ(view.to_vector<double>(), contiguous.to_vector<double>());
  CHECK_EQ(base.transpose(0, 1).contiguous().to_vector<double>(), contiguous.to_vector<double>());

  Tensor n = zeros({20000}, kFloat64);
  n.normal_(10.0, 0.5);
  const auto [mean, var] = moments(n.to_vector<double>());
  // Standard error of the mean 0.0035, of the standard deviation 0.0025.
  CHECK(std::abs(mean - 10.0) < 0.02);
  CHECK(std::abs(std::sqrt(var) - 0.5) < 0.015);
}

// ---- from values ----

TEST_CASE("from_vector keeps the values and takes its dtype from the C++ type") {
  const Tensor f = from_vector(std::vector<float>{1.5f, -2.0f, 3.25f});
  CHECK_EQ(f.dtype(), kFloat32);
  CHECK_EQ(f.sizes(), Shape{3});
  CHECK_EQ(f.to_vector<float>(), std::vector<float>{1.5f, -2.0f, 3.25f});
  const Tensor d = from_vector(std::vector<double>{0.1, 0.2});
  CHECK_EQ(d.dtype(), kFloat64);
  CHECK_EQ(d.to_vector<double>(), std::vector<double>{0.1, 0.2});
  const int64_t big = (int64_t{1} << 62) + 1;
  const Tensor l = from_vector(std::vector<int64_t>{big, -7});
  CHECK_EQ(l.dtype(), kInt64);
  CHECK_EQ(l.to_vector<int64_t>(), std::vector<int64_t>{big, -7});
  // int values become int64, as integer literals do.
  const Tensor i = from_vector(std::vector<int>{-1, 2, std::numeric_limits<int>::max()});
  CHECK_EQ(i.dtype(), kInt64);
  CHECK_EQ(i.to_vector<int64_t>(), std::vector<int64_t>{-1, 2, std::numeric_limits<int>::max()});
  CHECK_EQ(from_vector(std::vector<float>{}).sizes(), Shape{0});
}

TEST_CASE("from_vector shapes the values as asked, converts them and places them on the device") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor t = from_vector(std::vector<int>{1, 2, 3, 4, 5, 6}, {2, 3}, on(dev, kFloat32));
    CHECK_EQ(t.dtype(), kFloat32);
    CHECK_EQ(t.device(), dev);
    check_values(t, {2, 3}, {1, 2, 3, 4, 5, 6}, 0.0);
    const Tensor h = from_vector(std::vector<double>{0.5, 1.5}, {2, 1}, on(dev, kFloat16));
    CHECK_EQ(h.dtype(), kFloat16);
    check_values(h, {2, 1}, {0.5, 1.5}, 0.0);
  }
  CHECK_THROWS_WITH_AS(
      from_vector(std::vector<float>(5, 1.0f), {2, 3}),
      doctest::Contains("[from_vector] 5 values cannot fill a tensor of shape [2, 3]"), ShapeError);
  CHECK_THROWS_AS(from_vector(std::vector<float>(6, 1.0f), {-2, -3}), ShapeError);
}

TEST_CASE("tensor literals are float32 for floating values and int64 for integers") {
  const Tensor f = tensor({1.5, -2.5});
  CHECK_EQ(f.dtype(), kFloat32);
  CHECK_EQ(f.to_vector<float>(), std::vector<float>{1.5f, -2.5f});
  const Tensor fl = tensor({1.f, 2.f});
  CHECK_EQ(fl.dtype(), kFloat32);
  const Tensor i = tensor({1, 2, 3});
  CHECK_EQ(i.dtype(), kInt64);
  CHECK_EQ(i.to_vector<int64_t>(), std::vector<int64_t>{1, 2, 3});
  const Tensor l = tensor({int64_t{1} << 40, int64_t{-1}});
  CHECK_EQ(l.dtype(), kInt64);
  CHECK_EQ(l.to_vector<int64_t>(), std::vector<int64_t>{int64_t{1} << 40, -1});
  // A one-value literal is 1-d.
  CHECK_EQ(tensor({4.0}).sizes(), Shape{1});
  CHECK_EQ(tensor({4}).sizes(), Shape{1});
  // A dtype in the options wins.
  CHECK_EQ(tensor({0.1}, kFloat64).to_vector<double>(), std::vector<double>{0.1});
  CHECK_EQ(tensor({1, 0, 2}, kBool).to_vector<bool>(), std::vector<bool>{true, false, true});
  CHECK_EQ(tensor({1.0, 2.0}, TensorOptions(Device("sim:0"))).device(), Device("sim:0"));
}

TEST_CASE("a nested tensor literal is a row-major matrix and ragged rows are a ShapeError") {
  const Tensor m = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  CHECK_EQ(m.dtype(), kFloat32);
  check_values(m, {2, 3}, {1, 2, 3, 4, 5, 6}, 0.0);
  CHECK_EQ(tensor({{1.0, 2.0}}, kFloat64).sizes(), Shape{1, 2});
  CHECK_THROWS_WITH_AS(tensor({{1.0, 2.0}, {3.0}}),
                       doctest::Contains("[tensor] rows have different lengths (2 and 1)"),
                       ShapeError);
}

TEST_CASE("a factory for a CUDA device the build or machine lacks is a DeviceError") {
  REQUIRE_LE(cuda_device_count(), Device::kMaxIndex);
  const Device missing(DeviceType::CUDA, cuda_device_count());
  check_device_error([&] { (void)zeros({2}, TensorOptions(missing)); }, "device", {missing.str()});
  CHECK_THROWS_AS(empty({2}, TensorOptions(missing)), DeviceError);
  CHECK_THROWS_AS(rand({2}, TensorOptions(missing)), DeviceError);
  CHECK_THROWS_AS(arange(0, 4, 1, TensorOptions(missing)), DeviceError);
  CHECK_THROWS_AS(linspace(0, 1, 4, TensorOptions(missing)), DeviceError);
  CHECK_THROWS_AS(eye(2, -1, TensorOptions(missing)), DeviceError);
  CHECK_THROWS_AS(tensor({1.0}, TensorOptions(missing)), DeviceError);
}

}  // TEST_SUITE("engine")
