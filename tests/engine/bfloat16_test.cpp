// bfloat16: conversions (round to nearest even, specials), promotion, bytes, and every op family
// against a float32 reference computed from the same rounded inputs, within bfloat16's
// precision: one rounding of the result, a relative error of at most 2^-8 (half a unit in the
// last of its 8 significant bits, doubled for the float32 reference's own rounding).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/memgrad.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::testing::check_values;
using memgrad::testing::devices_under_test;

namespace {

constexpr double kBf16Eps = 1.0 / 256.0;  // 2^-8: bfloat16's relative precision

TensorOptions on(Device d, DType dtype = kFloat32) { return TensorOptions(dtype).with_device(d); }

// Every element of `got` (any dtype) within `rel` x (|ref| + `floor`) of `ref` (float32).
void check_close(const Tensor& got, const Tensor& ref, double rel, double floor = 0.0) {
  REQUIRE(got.sizes() == ref.sizes());
  const std::vector<double> g = got.to_vector<double>(), r = ref.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    CAPTURE(i);
    CAPTURE(g[i]);
    CAPTURE(r[i]);
    if (std::isnan(r[i])) {
      CHECK(std::isnan(g[i]));
      continue;
    }
    CHECK(std::abs(g[i] - r[i]) <= rel * (std::abs(r[i]) + floor));
  }
}

// A float32 tensor whose values are exactly bfloat16 numbers (the inputs both sides share).
Tensor bf16_values(const Shape& sizes, Device d, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  return (randn(sizes, on(Device("cpu")), &g) * scale).to(kBFloat16).to(kFloat32).to(d);
}

}  // namespace

TEST_SUITE("bfloat16") {
TEST_CASE("float32 to bfloat16 rounds to nearest even and keeps the specials") {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even significand (1);
  // 1 + 3 x 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: it goes up to 1 + 2^-6.
  const float tie_down = 1.0f + std::ldexp(1.0f, -8), tie_up = 1.0f + 3 * std::ldexp(1.0f, -8);
  CHECK_EQ(float_to_bfloat16(tie_down).bits, 0x3f80);
  CHECK_EQ(float_to_bfloat16(tie_up).bits, 0x3f82);
  CHECK_EQ(float_to_bfloat16(1.0f + std::ldexp(1.0f, -7)).bits, 0x3f81);  // exact
  CHECK_EQ(float_to_bfloat16(std::numeric_limits<float>::infinity()).bits, 0x7f80);
  CHECK_EQ(float_to_bfloat16(-0.0f).bits, 0x8000);
  CHECK(std::isnan(bfloat16_to_float(float_to_bfloat16(std::nanf("")))));
  // float32's largest finite value is past bfloat16's largest (0x7f7f): it rounds to inf,
  // while bfloat16 keeps float32's range where float16 overflows at 65504.
  CHECK_EQ(float_to_bfloat16(std::numeric_limits<float>::max()).bits, 0x7f80);
  CHECK_EQ(bfloat16_to_float(float_to_bfloat16(1e38f)), doctest::Approx(1e38).epsilon(kBf16Eps));
  for (Device d : devices_under_test()) {
    CAPTURE(d.str());
    const Tensor x = tensor({1.0, tie_down, tie_up, 65504.0 * 4, 1e-30, -3.0}, on(d));
    const Tensor b = x.to(kBFloat16);
    CHECK_EQ(b.dtype(), kBFloat16);
    const double tiny = bfloat16_to_float(float_to_bfloat16(1e-30f));
    check_values(b, {6}, {1.0, 1.0, 1.0 + std::ldexp(1.0, -6), 262144.0, tiny, -3.0}, 0.0);
    // float16 cannot hold 2^18 (inf) nor 1e-30 (0).
    const std::vector<double> h = b.to(kFloat16).to_vector<double>();
    CHECK_EQ(h, std::vector<double>{1.0, 1.0, 1.0 + std::ldexp(1.0, -6), INFINITY, 0.0, -3.0});
    check_values(b.to(kInt64), {6}, {1, 1, 1, 262144, 0, -3}, 0.0);
  }
}

TEST_CASE("promotion, names, bytes") {
  CHECK_EQ(dtype_name(kBFloat16), "bfloat16");
  CHECK_EQ(parse_dtype("bfloat16"), kBFloat16);
  CHECK_EQ(element_size(kBFloat16), 2);
  CHECK(is_floating(kBFloat16));
  // PyTorch's lattice: neither 16-bit float holds the other, so they meet in float32.
  CHECK_EQ(promote_types(kBFloat16, kFloat16), kFloat32);
  CHECK_EQ(promote_types(kFloat16, kBFloat16), kFloat32);
  CHECK_EQ(promote_types(kBFloat16, kFloat32), kFloat32);
  CHECK_EQ(promote_types(kBFloat16, kInt64), kBFloat16);
  CHECK_EQ(promote_types(kBool, kBFloat16), kBFloat16);
  CHECK_EQ(promote_types(kBFloat16, kBFloat16), kBFloat16);
  for (Device d : devices_under_test()) {
    CAPTURE(d.str());
    const Tensor b = ones({3, 5}, on(d, kBFloat16));
    CHECK_EQ(b.nbytes(), 30);
    CHECK_EQ((b + ones({3, 5}, on(d, kFloat16))).dtype(), kFloat32);
    CHECK_EQ((b + ones({3, 5}, on(d))).dtype(), kFloat32);
    CHECK_EQ((b * 3).dtype(), kBFloat16);
    CHECK_EQ((b + arange(5, on(d, kInt64))).dtype(), kBFloat16);
    CHECK_EQ(b.gt(0.5).dtype(), kBool);
  }
  CHECK_EQ(tensor({1.5}, kBFloat16).str(), "tensor([1.5000], dtype=bfloat16)");
}

TEST_CASE("elementwise ops agree with float32 within bfloat16's precision") {
  // One op each: the bfloat16 side rounds once, where a chain would round at every step.
  // `b` is positive (log, sqrt, pow and division take it).
  using Op = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }},
      {"exp", [](const Tensor& a, const Tensor&) { return exp(a); }},
      {"log", [](const Tensor&, const Tensor& b) { return log(b); }},
      {"sqrt", [](const Tensor&, const Tensor& b) { return sqrt(b); }},
      {"tanh", [](const Tensor& a, const Tensor&) { return tanh(a); }},
      {"sigmoid", [](const Tensor& a, const Tensor&) { return sigmoid(a); }},
      {"gelu", [](const Tensor& a, const Tensor&) { return gelu(a); }},
      {"silu", [](const Tensor& a, const Tensor&) { return silu(a); }},
      {"relu", [](const Tensor& a, const Tensor&) { return relu(a); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"where", [](const Tensor& a, const Tensor& b) { return where(a.gt(b), a, b * 2); }},
      {"clamp", [](const Tensor& a, const Tensor&) { return clamp(a, -0.5, 0.75); }},
      {"pow", [](const Tensor&, const Tensor& b) { return pow(b, 1.5); }},
  };
  for (Device d : devices_under_test()) {
    CAPTURE(d.str());
    const Tensor a = bf16_values({7, 33}, d, 1);
    const Tensor b = (bf16_values({7, 33}, d, 2).abs() + 0.25).to(kBFloat16).to(kFloat32);
    const Tensor a16 = a.to(kBFloat16), b16 = b.to(kBFloat16);
    for (const auto& [name, op] : ops) {
      CAPTURE(name);
      const Tensor got = op(a16, b16);
      CHECK_EQ(got.dtype(), kBFloat16);
      // A transcendental's float32 result is itself within a few float32 ulps: negligible.
      check_close(got, op(a, b), kBf16Eps, 1e-30);
    }
    // Strided and broadcast operands take the same paths as float16's.
    check_close(a16.t() + b16.t(), a.t() + b.t(), kBf16Eps);
    check_close(a16 * b16.narrow(0, 0, 1), a * b.narrow(0, 0, 1), kBf16Eps);
    // In place keeps the dtype and rounds once per op.
    Tensor c = a16.clone();
    c.mul_(b16).add_(1.0);
    check_close(c, (a16 * b16).to(kFloat32) + 1.0, kBf16Eps);
  }
}

TEST_CASE("reductions, softmax and matmul accumulate in float32 and round once") {
  for (Device d : devices_under_test()) {
    CAPTURE(d.str());
    const Tensor x = bf16_values({16, 300}, d, 3);
    const Tensor x16 = x.to(kBFloat16);
    // Sums of 4800 terms: float16 would overflow nothing here but lose them; bfloat16 keeps a
    // float32 accumulator and rounds the total once.
    for (const auto& [name, got, ref] : std::vector<std::tuple<std::string, Tensor, Tensor>>{
             {"sum", x16.sum(), x.sum()},
             {"sum dim", sum(x16, {1}), sum(x, {1})},
             {"mean dim", mean(x16, {0}), mean(x, {0})},
             {"amax", amax(x16, {1}), amax(x, {1})},
             {"norm", norm(x16), norm(x)},
             {"var", var(x16, {1}), var(x, {1})},
             {"softmax", softmax(x16, 1), softmax(x, 1)},
             {"log_softmax", log_softmax(x16, 1), log_softmax(x, 1)},
             {"logsumexp", logsumexp(x16, {1}), logsumexp(x, {1})}}) {
      CAPTURE(name);
      CHECK_EQ(got.dtype(), kBFloat16);
      // A sum of terms of mixed signs: relative to the sum of magnitudes.
      const double floor = name.starts_with("sum") || name.starts_with("mean") ? 1.0 : 1e-30;
      check_close(got, ref, kBf16Eps, floor);
    }
    CHECK_EQ(argmax(x16, 1).to_vector<int64_t>(), argmax(x, 1).to_vector<int64_t>());
    const Tensor a = bf16_values({9, 64}, d, 4), b = bf16_values({64, 5}, d, 5);
    const Tensor c = mm(a.to(kBFloat16), b.to(kBFloat16));
    CHECK_EQ(c.dtype(), kBFloat16);
    // The product accumulates in float32: the only error is the final rounding, relative to
    // the sum of |a||b| (the terms' magnitudes), which bounds a float32 GEMM's error too.
    const Tensor scale = mm(a.abs(), b.abs());
    const std::vector<double> got = c.to_vector<double>(), ref = mm(a, b).to_vector<double>(),
                              s = scale.to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i) {
      CHECK(std::abs(got[i] - ref[i]) <= kBf16Eps * std::abs(ref[i]) + 1e-5 * s[i]);
    }
    const Tensor l =
        linear(a.to(kBFloat16), b.t().to(kBFloat16).contiguous(), ones({5}, on(d, kBFloat16)));
    check_close(l, linear(a, b.t().contiguous(), ones({5}, on(d))), kBf16Eps, 1.0);
    const Tensor bat = bf16_values({3, 4, 8}, d, 6);
    check_close(bmm(bat.to(kBFloat16), bat.transpose(1, 2).to(kBFloat16)),
                bmm(bat, bat.transpose(1, 2)), kBf16Eps, 1.0);
  }
}

TEST_CASE("random draws, indexing and copies in bfloat16") {
  for (Device d : devices_under_test()) {
    CAPTURE(d.str());
    Generator g(7);
    const Tensor u = rand({4096}, on(d, kBFloat16), &g);
    CHECK_EQ(u.dtype(), kBFloat16);
    for (double v : u.to_vector<double>()) {
      // 8 random bits, as PyTorch draws them for bfloat16: multiples of 2^-8 below 1.
      CHECK(v >= 0.0);
      CHECK(v < 1.0);
      CHECK_EQ(v * 256.0, std::floor(v * 256.0));
    }
    const Tensor n = randn({4096}, on(d, kBFloat16), &g);
    CHECK(std::abs(n.to(kFloat32).mean().item<double>()) < 0.1);
    const Tensor table = bf16_values({10, 6}, d, 8).to(kBFloat16);
    const Tensor idx = tensor({3.0, 0.0, 3.0}, on(d, kInt64));
    check_values(table.index_select(0, idx), {3, 6},
                 table.to(kFloat32).index_select(0, idx).to_vector<double>(), 0.0);
    const Tensor rows = tensor({3.0, 0.0, 3.0}, on(d, kInt64)).view({3, 1}).expand({3, 6});
    const Tensor acc = scatter_add(zeros({10, 6}, on(d, kBFloat16)), 0, rows.contiguous(),
                                   ones({3, 6}, on(d, kBFloat16)));
    CHECK_EQ(acc.sum().item<double>(), 18.0);
    CHECK_EQ(acc.narrow(0, 3, 1).sum().item<double>(), 12.0);
    // A copy between the 16-bit floats goes through float32: exact for values both hold.
    check_values(tensor({0.5, -2.0, 1024.0}, on(d)).to(kBFloat16).to(kFloat16), {3},
                 {0.5, -2.0, 1024.0}, 0.0);
  }
}
}  // TEST_SUITE("bfloat16")
