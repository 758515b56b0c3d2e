// The shared elementwise formulas (kernels/elementwise_formulas.h) called directly: every
// UnaryOp's value and derivative and every BinaryOp's value against closed forms, float16
// rounding as both backends store it, edge values (signed zeros, infinities, NaN), integer
// compute, the two-roundings rule of a + alpha b, and the compute-type rules. The CUDA kernels
// call these same functions, so a formula change fails here on a machine without a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/elementwise_formulas.h"

using namespace memgrad;
using namespace memgrad::kernels;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kE = 2.718281828459045;

// x rounded to float16 and back: round to nearest even, as both backends store float16.
float to_half(float x) { return half_to_float(float_to_half(x)); }

// What a float16 tensor holds after op: input stored as half, computed in float, stored as half.
float half_unary(UnaryOp op, float x) { return to_half(unary_value(op, to_half(x))); }
float half_binary(BinaryOp op, float a, float b) {
  return to_half(binary_value(op, to_half(a), to_half(b), 1.0f));
}

// got == expected: equal, both NaN, or within `rel` of expected (relative, absolute near 0).
bool close(double got, double expected, double rel) {
  if (std::isnan(expected)) return std::isnan(got);
  if (std::isinf(expected)) return got == expected;
  return std::abs(got - expected) <= rel * std::max(1.0, std::abs(expected));
}

struct UnaryCase {
  UnaryOp op;
  double x;
  double expected;
};

// Closed forms of every UnaryOp, edge values included.
const std::vector<UnaryCase> kUnaryCases = {
    {UnaryOp::Neg, 2.5, -2.5},
    {UnaryOp::Neg, -kInf, kInf},
    {UnaryOp::Exp, 0.0, 1.0},
    {UnaryOp::Exp, 1.0, kE},
    {UnaryOp::Exp, -kInf, 0.0},
    {UnaryOp::Exp, kInf, kInf},
    {UnaryOp::Log, 1.0, 0.0},
    {UnaryOp::Log, kE, 1.0},
    {UnaryOp::Log, 0.0, -kInf},
    {UnaryOp::Log, -1.0, kNaN},
    {UnaryOp::Sqrt, 4.0, 2.0},
    {UnaryOp::Sqrt, 2.0, 1.4142135623730951},
    {UnaryOp::Sqrt, -1.0, kNaN},
    {UnaryOp::Sqrt, kInf, kInf},
    {UnaryOp::Rsqrt, 4.0, 0.5},
    {UnaryOp::Rsqrt, 0.0, kInf},
    {UnaryOp::Abs, -2.0, 2.0},
    {UnaryOp::Abs, -kInf, kInf},
    {UnaryOp::Sign, -3.0, -1.0},
    {UnaryOp::Sign, 0.0, 0.0},
    {UnaryOp::Sign, 2.0, 1.0},
    {UnaryOp::Sign, kNaN, 0.0},
    {UnaryOp::Tanh, 0.0, 0.0},
    {UnaryOp::Tanh, 0.5, 0.46211715726000974},
    {UnaryOp::Tanh, kInf, 1.0},
    {UnaryOp::Tanh, -kInf, -1.0},
    {UnaryOp::Sigmoid, 0.0, 0.5},
    {UnaryOp::Sigmoid, 1.0, 0.7310585786300049},
    {UnaryOp::Sigmoid, kInf, 1.0},
    {UnaryOp::Sigmoid, -kInf, 0.0},
    {UnaryOp::Relu, -1.0, 0.0},
    {UnaryOp::Relu, 2.0, 2.0},
    {UnaryOp::Relu, kNaN, kNaN},
    {UnaryOp::Relu, kInf, kInf},
    {UnaryOp::GeluTanh, 0.0, 0.0},
    {UnaryOp::GeluTanh, 1.0, 0.8411919906082768},
    {UnaryOp::GeluTanh, 20.0, 20.0},
    {UnaryOp::GeluErf, 0.0, 0.0},
    {UnaryOp::GeluErf, 1.0, 0.8413447460685429},
    {UnaryOp::GeluErf, -1.0, -0.15865525393145707},
    {UnaryOp::Silu, 0.0, 0.0},
    {UnaryOp::Silu, 1.0, 0.7310585786300049},
    {UnaryOp::Reciprocal, 4.0, 0.25},
    {UnaryOp::Reciprocal, 0.0, kInf},
    {UnaryOp::Reciprocal, -kInf, 0.0},
    {UnaryOp::Square, -3.0, 9.0},
    {UnaryOp::Square, 1e200, kInf},
    {UnaryOp::LogicalNot, 0.0, 1.0},
    {UnaryOp::LogicalNot, 2.0, 0.0},
    {UnaryOp::LogicalNot, kNaN, 0.0},
};

// The ops whose backward reads the forward's output (backend.h); the others read the input.
bool saves_output(UnaryOp op) {
  return op == UnaryOp::Exp || op == UnaryOp::Tanh || op == UnaryOp::Sigmoid ||
         op == UnaryOp::Relu || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt ||
         op == UnaryOp::Reciprocal;
}

}  // namespace

TEST_SUITE("kernels") {

TEST_CASE("unary_value matches the closed form of every op in double and float") {
  for (const UnaryCase& c : kUnaryCases) {
    CAPTURE(static_cast<int>(c.op));
    CAPTURE(c.x);
    CHECK(close(unary_value<double>(c.op, c.x), c.expected, 1e-15));
    // float: the same value to float precision (4 ulp for the transcendental ones).
    const float expected_f = static_cast<float>(c.expected);
    CHECK(close(unary_value<float>(c.op, static_cast<float>(c.x)), expected_f, 5e-7));
  }
}

TEST_CASE("unary_value keeps the sign rules of zero") {
  // neg(0) = -0; abs(-0) = +0 (the sign bit cleared); 1 / -0 = -inf; relu(-0) = -0 (not < 0).
  CHECK(std::signbit(unary_value(UnaryOp::Neg, 0.0f)));
  CHECK_FALSE(std::signbit(unary_value(UnaryOp::Abs, -0.0f)));
  CHECK_FALSE(std::signbit(abs_of(-0.0)));
  CHECK_EQ(unary_value(UnaryOp::Reciprocal, -0.0), -kInf);
  CHECK(std::signbit(unary_value(UnaryOp::Relu, -0.0f)));
  // abs of a NaN is a NaN (on both backends, with the sign bit cleared).
  CHECK(std::isnan(unary_value(UnaryOp::Abs, -kNaN)));
}

TEST_CASE("unary_value on int64 computes exactly or through double, truncated") {
  CHECK_EQ(unary_value<int64_t>(UnaryOp::Neg, 5), -5);
  CHECK_EQ(unary_value<int64_t>(UnaryOp::Abs, -7), 7);
  CHECK_EQ(unary_value<int64_t>(UnaryOp::Sign, -7), -1);
  CHECK_EQ(unary_value<int64_t>(UnaryOp::Sign, 0), 0);
  CHECK_EQ(unary_value<int64_t>(UnaryOp::Relu, -3), 0);
  CHECK_EQ(unary_value<int64_t>(UnaryOp::Square, -4), 16);
  CHECK_EQ(unary_value<int64_t>(UnaryOp::LogicalNot, 0), 1);
  CHECK_EQ(unary_value<int64_t>(UnaryOp::LogicalNot, 9), 0);
  // exp(2) = 7.389..., sqrt(10) = 3.162..., 1 / 3 = 0.333...: truncated toward zero.
  CHECK_EQ(unary_value<int64_t>(UnaryOp::Exp, 2), 7);
  CHECK_EQ(unary_value<int64_t>(UnaryOp::Sqrt, 10), 3);
  CHECK_EQ(unary_value<int64_t>(UnaryOp::Reciprocal, 3), 0);
}

TEST_CASE("unary_value on float16 inputs rounds the float result to nearest even half") {
  // exp(11) = 59874.14: half's spacing there is 32, so 59872. exp(12) = 162754.8: beyond
  // half's largest finite value 65504, so inf. exp(-17) = 4.1e-8: the nearest half is the
  // smallest subnormal 2^-24.
  CHECK_EQ(half_unary(UnaryOp::Exp, 11.0f), 59872.0f);
  CHECK_EQ(half_unary(UnaryOp::Exp, 12.0f), std::numeric_limits<float>::infinity());
  CHECK_EQ(half_unary(UnaryOp::Exp, -17.0f), std::ldexp(1.0f, -24));
  // sqrt(2) = 1.41421...: half 1.4140625 (0x3DA8).
  CHECK_EQ(half_unary(UnaryOp::Sqrt, 2.0f), 1.4140625f);
  // (2^-12)^2 = 2^-24 is half's smallest subnormal; (2^-13)^2 = 2^-26 rounds to 0; 256^2
  // overflows.
  CHECK_EQ(half_unary(UnaryOp::Square, std::ldexp(1.0f, -12)), std::ldexp(1.0f, -24));
  CHECK_EQ(half_unary(UnaryOp::Square, std::ldexp(1.0f, -13)), 0.0f);
  CHECK_EQ(half_unary(UnaryOp::Square, 256.0f), std::numeric_limits<float>::infinity());
  // sigmoid(-20) = 2.06e-9: below half's subnormals, 0.
  CHECK_EQ(half_unary(UnaryOp::Sigmoid, -20.0f), 0.0f);
  // 0.1 is stored as half 0.0999755859375 before relu sees it.
  CHECK_EQ(half_unary(UnaryOp::Relu, 0.1f), 0.0999755859375f);
  // 1 / 3: half 0.333251953125 (0x3555).
  CHECK_EQ(half_unary(UnaryOp::Reciprocal, 3.0f), 0.333251953125f);
}

TEST_CASE("unary_grad matches the closed-form derivative of every op") {
  const double g = 1.5;
  // saved value s: the output for output-saving ops, the input otherwise (see each line).
  CHECK_EQ(unary_grad(UnaryOp::Neg, g, 3.0), -1.5);
  CHECK(close(unary_grad(UnaryOp::Exp, g, kE), 1.5 * kE, 1e-15));  // s = exp(1)
  CHECK_EQ(unary_grad(UnaryOp::Log, g, 2.0), 0.75);                // x = 2: g / x
  CHECK_EQ(unary_grad(UnaryOp::Sqrt, g, 2.0), 0.375);              // s = sqrt(4): g / (2 s)
  CHECK_EQ(unary_grad(UnaryOp::Rsqrt, g, 0.5), -0.09375);          // s = 4^-1/2: -g / 16
  CHECK_EQ(unary_grad(UnaryOp::Abs, g, -2.0), -1.5);               // sign(x) g
  CHECK_EQ(unary_grad(UnaryOp::Abs, g, 0.0), 0.0);                 // 0 at x = 0
  CHECK_EQ(unary_grad(UnaryOp::Sign, g, 2.0), 0.0);
  CHECK_EQ(unary_grad(UnaryOp::Tanh, g, 0.5), 1.125);        // g (1 - s^2)
  CHECK_EQ(unary_grad(UnaryOp::Sigmoid, g, 0.25), 0.28125);  // g s (1 - s)
  CHECK_EQ(unary_grad(UnaryOp::Relu, g, 2.0), 1.5);
  CHECK_EQ(unary_grad(UnaryOp::Relu, g, 0.0), 0.0);                  // 0 at x <= 0
  CHECK(close(unary_grad(UnaryOp::GeluTanh, g, 0.0), 0.75, 1e-15));  // gelu'(0) = 1/2
  CHECK(close(unary_grad(UnaryOp::GeluErf, g, 0.0), 0.75, 1e-15));
  // gelu_erf'(1) = Phi(1) + phi(1) = 0.8413447... + 0.2419707... = 1.0833154705876864
  CHECK(close(unary_grad(UnaryOp::GeluErf, 1.0, 1.0), 1.0833154705876864, 1e-15));
  CHECK(close(unary_grad(UnaryOp::Silu, g, 0.0), 0.75, 1e-15));  // silu'(0) = 1/2
  CHECK_EQ(unary_grad(UnaryOp::Reciprocal, g, 0.5), -0.375);     // s = 1/2: -g s^2
  CHECK_EQ(unary_grad(UnaryOp::Square, g, 3.0), 9.0);            // 2 g x
  CHECK_EQ(unary_grad(UnaryOp::LogicalNot, g, 3.0), 0.0);
}

TEST_CASE("unary_grad agrees with a central difference of unary_value") {
  // d/dx f(x) ~ (f(x + h) - f(x - h)) / 2h, with h = 1e-6: accurate to ~1e-9 for these x.
  const UnaryOp ops[] = {UnaryOp::Neg,        UnaryOp::Exp,      UnaryOp::Log,     UnaryOp::Sqrt,
                         UnaryOp::Rsqrt,      UnaryOp::Abs,      UnaryOp::Tanh,    UnaryOp::Sigmoid,
                         UnaryOp::Relu,       UnaryOp::GeluTanh, UnaryOp::GeluErf, UnaryOp::Silu,
                         UnaryOp::Reciprocal, UnaryOp::Square};
  const bool positive_only[] = {false, false, true,  true,  true,  false, false,
                                false, false, false, false, false, false, false};
  const double xs[] = {-1.3, -0.2, 0.7, 2.1};
  const double h = 1e-6;
  for (size_t k = 0; k < std::size(ops); ++k) {
    for (double x : xs) {
      if (positive_only[k] && x <= 0) continue;
      CAPTURE(static_cast<int>(ops[k]));
      CAPTURE(x);
      const double numeric = (unary_value(ops[k], x + h) - unary_value(ops[k], x - h)) / (2 * h);
      const double saved = saves_output(ops[k]) ? unary_value(ops[k], x) : x;
      CHECK(close(unary_grad(ops[k], 1.0, saved), numeric, 1e-6));
    }
  }
}

TEST_CASE("the typed-loop entry points equal unary_value and unary_grad") {
  // The CPU's contiguous loops call these directly; they must be the same formulas.
  for (float x : {-2.5f, -0.0f, 0.0f, 3.25f}) {
    CAPTURE(x);
    CHECK_EQ(neg_of(x), unary_value(UnaryOp::Neg, x));
    CHECK_EQ(relu_of(x), unary_value(UnaryOp::Relu, x));
    CHECK_EQ(square_of(x), unary_value(UnaryOp::Square, x));
    CHECK_EQ(abs_of(x), unary_value(UnaryOp::Abs, x));
    CHECK_EQ(relu_grad(1.5f, x), unary_grad(UnaryOp::Relu, 1.5f, x));
    CHECK_EQ(tanh_grad(1.5f, x), unary_grad(UnaryOp::Tanh, 1.5f, x));
    CHECK_EQ(sigmoid_grad(1.5f, x), unary_grad(UnaryOp::Sigmoid, 1.5f, x));
    CHECK_EQ(exp_grad(1.5f, x), unary_grad(UnaryOp::Exp, 1.5f, x));
  }
}

TEST_CASE("binary_value matches the closed form of every op") {
  // Add and Sub scale b by alpha.
  CHECK_EQ(binary_value(BinaryOp::Add, 2.0, 3.0, 1.0), 5.0);
  CHECK_EQ(binary_value(BinaryOp::Add, 2.0, 3.0, -2.0), -4.0);
  CHECK_EQ(binary_value(BinaryOp::Sub, 2.0, 3.0, 1.0), -1.0);
  CHECK_EQ(binary_value(BinaryOp::Sub, 2.0, 3.0, 0.5), 0.5);
  CHECK(std::isnan(binary_value(BinaryOp::Add, kInf, -kInf, 1.0)));
  CHECK_EQ(binary_value(BinaryOp::Mul, 2.0, -3.0, 1.0), -6.0);
  CHECK(std::isnan(binary_value(BinaryOp::Mul, kInf, 0.0, 1.0)));
  CHECK_EQ(binary_value(BinaryOp::Div, 1.0, 4.0, 1.0), 0.25);
  CHECK_EQ(binary_value(BinaryOp::Div, 1.0, 0.0, 1.0), kInf);
  CHECK_EQ(binary_value(BinaryOp::Div, -1.0, 0.0, 1.0), -kInf);
  CHECK(std::isnan(binary_value(BinaryOp::Div, 0.0, 0.0, 1.0)));
  CHECK_EQ(binary_value(BinaryOp::Pow, 2.0, 10.0, 1.0), 1024.0);
  CHECK_EQ(binary_value(BinaryOp::Pow, 4.0, 0.5, 1.0), 2.0);
  CHECK_EQ(binary_value(BinaryOp::Pow, kNaN, 0.0, 1.0), 1.0);  // x^0 = 1 for every x
  CHECK_EQ(binary_value(BinaryOp::Pow, 0.0, -1.0, 1.0), kInf);
  // max/min: a NaN on either side propagates.
  CHECK_EQ(binary_value(BinaryOp::Maximum, 1.0, 2.0, 1.0), 2.0);
  CHECK_EQ(binary_value(BinaryOp::Minimum, 1.0, 2.0, 1.0), 1.0);
  CHECK_EQ(binary_value(BinaryOp::Maximum, -kInf, -3.0, 1.0), -3.0);
  CHECK(std::isnan(binary_value(BinaryOp::Maximum, kNaN, 1.0, 1.0)));
  CHECK(std::isnan(binary_value(BinaryOp::Maximum, 1.0, kNaN, 1.0)));
  CHECK(std::isnan(binary_value(BinaryOp::Minimum, kNaN, 1.0, 1.0)));
  CHECK(std::isnan(binary_value(BinaryOp::Minimum, 1.0, kNaN, 1.0)));
  // Comparisons give 1 or 0; every ordered comparison with a NaN is false, != is true.
  const double a = 1.0, b = 2.0;
  CHECK_EQ(binary_value(BinaryOp::Eq, a, b, 1.0), 0.0);
  CHECK_EQ(binary_value(BinaryOp::Eq, b, b, 1.0), 1.0);
  CHECK_EQ(binary_value(BinaryOp::Ne, a, b, 1.0), 1.0);
  CHECK_EQ(binary_value(BinaryOp::Lt, a, b, 1.0), 1.0);
  CHECK_EQ(binary_value(BinaryOp::Le, b, b, 1.0), 1.0);
  CHECK_EQ(binary_value(BinaryOp::Gt, a, b, 1.0), 0.0);
  CHECK_EQ(binary_value(BinaryOp::Ge, b, b, 1.0), 1.0);
  CHECK_EQ(binary_value(BinaryOp::Eq, kNaN, kNaN, 1.0), 0.0);
  CHECK_EQ(binary_value(BinaryOp::Ne, kNaN, kNaN, 1.0), 1.0);
  CHECK_EQ(binary_value(BinaryOp::Lt, kNaN, 1.0, 1.0), 0.0);
  CHECK_EQ(binary_value(BinaryOp::Ge, kNaN, 1.0, 1.0), 0.0);
  CHECK_EQ(binary_value(BinaryOp::Eq, -0.0, 0.0, 1.0), 1.0);
  // Logical ops: non-zero is true, a NaN included.
  CHECK_EQ(binary_value(BinaryOp::LogicalAnd, 0.0, 2.0, 1.0), 0.0);
  CHECK_EQ(binary_value(BinaryOp::LogicalAnd, 3.0, -1.0, 1.0), 1.0);
  CHECK_EQ(binary_value(BinaryOp::LogicalOr, 0.0, 0.0, 1.0), 0.0);
  CHECK_EQ(binary_value(BinaryOp::LogicalOr, kNaN, 0.0, 1.0), 1.0);
}

TEST_CASE("binary_value on int64 divides by truncation and by zero gives 0") {
  CHECK_EQ(binary_value<int64_t>(BinaryOp::Add, 7, 2, 3), 13);
  CHECK_EQ(binary_value<int64_t>(BinaryOp::Sub, 7, 2, 3), 1);
  CHECK_EQ(binary_value<int64_t>(BinaryOp::Mul, -7, 3, 1), -21);
  CHECK_EQ(binary_value<int64_t>(BinaryOp::Div, 7, 2, 1), 3);
  CHECK_EQ(binary_value<int64_t>(BinaryOp::Div, -7, 2, 1), -3);
  CHECK_EQ(binary_value<int64_t>(BinaryOp::Div, 7, 0, 1), 0);
  CHECK_EQ(binary_value<int64_t>(BinaryOp::Pow, 3, 4, 1), 81);
  CHECK_EQ(binary_value<int64_t>(BinaryOp::Pow, 2, -1, 1), 0);  // 0.5 truncated
  CHECK_EQ(binary_value<int64_t>(BinaryOp::Maximum, -3, 5, 1), 5);
  CHECK_EQ(binary_value<int64_t>(BinaryOp::Minimum, -3, 5, 1), -3);
  CHECK_EQ(binary_value<int64_t>(BinaryOp::Le, 5, 5, 1), 1);
}

TEST_CASE("a + alpha b rounds the product before the sum, never one fused rounding") {
  // alpha b = (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 exactly; in float the 2^-24 is half an ulp and
  // rounds to even (away), so -1 + alpha b = 2^-11. An FMA would keep 2^-11 + 2^-24.
  const float v = 1.0f + std::ldexp(1.0f, -12);
  CHECK_EQ(add_value(-1.0f, v, v), std::ldexp(1.0f, -11));
  CHECK_EQ(binary_value(BinaryOp::Add, -1.0f, v, v), std::ldexp(1.0f, -11));
  CHECK_EQ(binary_value(BinaryOp::Sub, 1.0f, v, v), -std::ldexp(1.0f, -11));
  // The same rule in tanh's derivative: g (1 - s^2) with s^2 rounded first.
  CHECK_EQ(tanh_grad(1.0f, v), -(std::ldexp(1.0f, -11)));
}

TEST_CASE("binary_value on float16 inputs rounds the float result to nearest even half") {
  // Half spacing is 2 in [2048, 4096): 2049 is a tie and goes to the even 2048, 2051 to 2052.
  CHECK_EQ(half_binary(BinaryOp::Add, 2048.0f, 1.0f), 2048.0f);
  CHECK_EQ(half_binary(BinaryOp::Add, 2048.0f, 3.0f), 2052.0f);
  // 65504 is half's largest finite value: 65519 rounds back to it, 65520 (the tie) to inf.
  CHECK_EQ(half_binary(BinaryOp::Add, 65504.0f, 15.0f), 65504.0f);
  CHECK_EQ(half_binary(BinaryOp::Add, 65504.0f, 16.0f), std::numeric_limits<float>::infinity());
  // (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20: exact in float, 1 + 2^-9 in half.
  const float v = 1.0f + std::ldexp(1.0f, -10);
  CHECK_EQ(half_binary(BinaryOp::Mul, v, v), 1.0f + std::ldexp(1.0f, -9));
  // 1 / 3 in half.
  CHECK_EQ(half_binary(BinaryOp::Div, 1.0f, 3.0f), 0.333251953125f);
}

TEST_CASE("pow, clamp and where follow their closed forms") {
  // d/dx x^e = e x^(e-1): 3 * 2^2 * g; and 0 for e = 0 even at x = 0.
  CHECK_EQ(pow_scalar_grad(1.5, 2.0, 3.0), 18.0);
  CHECK_EQ(pow_scalar_grad(1.5, 0.0, 0.0), 0.0);
  CHECK_EQ(pow_scalar_grad(1.0, 4.0, 0.5), 0.25);  // 0.5 / sqrt(4)
  CHECK_EQ(clamp_value(5.0, 0.0, 1.0, true, true), 1.0);
  CHECK_EQ(clamp_value(-5.0, 0.0, 1.0, true, true), 0.0);
  CHECK_EQ(clamp_value(-5.0, 0.0, 1.0, false, true), -5.0);
  CHECK(std::isnan(clamp_value(kNaN, 0.0, 1.0, true, true)));
  // The gradient passes at the bounds themselves (PyTorch).
  CHECK_EQ(clamp_grad(2.0, 1.0, 0.0, 1.0, true, true), 2.0);
  CHECK_EQ(clamp_grad(2.0, 1.5, 0.0, 1.0, true, true), 0.0);
  CHECK_EQ(clamp_grad(2.0, 1.5, 0.0, 1.0, true, false), 2.0);
  CHECK_EQ(where_value(1.0, 2.0, 3.0), 2.0);
  CHECK_EQ(where_value(0.0, 2.0, 3.0), 3.0);
}

TEST_CASE("the compute-type rules pick float for float16 and the PyTorch promotions") {
  CHECK_EQ(compute_dtype(DType::Float16), DType::Float32);
  CHECK_EQ(compute_dtype(DType::Int64), DType::Int64);
  CHECK_EQ(floating_compute_dtype(DType::Float16), DType::Float32);
  CHECK_EQ(floating_compute_dtype(DType::Float64), DType::Float64);
  CHECK_EQ(unary_compute_dtype(DType::Float16, DType::Float16), DType::Float32);
  CHECK_EQ(unary_compute_dtype(DType::Int64, DType::Int64), DType::Int64);
  CHECK_EQ(unary_compute_dtype(DType::Bool, DType::Bool), DType::Float64);
  CHECK_EQ(unary_compute_dtype(DType::Float32, DType::Int64), DType::Float32);
  CHECK_EQ(unary_compute_dtype(DType::Int64, DType::Float32), DType::Float64);
  // Same dtypes: the inputs' compute type, comparisons too.
  CHECK_EQ(binary_compute_dtype(BinaryOp::Add, DType::Float16, DType::Float16, DType::Float16),
           DType::Float32);
  CHECK_EQ(binary_compute_dtype(BinaryOp::Lt, DType::Bool, DType::Int64, DType::Int64),
           DType::Int64);
  // Mixed: comparisons in float64 (a floating input) or int64; others in the output's type.
  CHECK_EQ(binary_compute_dtype(BinaryOp::Lt, DType::Bool, DType::Int64, DType::Float32),
           DType::Float64);
  CHECK_EQ(binary_compute_dtype(BinaryOp::Eq, DType::Bool, DType::Int64, DType::Bool),
           DType::Int64);
  CHECK_EQ(binary_compute_dtype(BinaryOp::Mul, DType::Float16, DType::Float16, DType::Float32),
           DType::Float32);
  CHECK_EQ(binary_compute_dtype(BinaryOp::LogicalAnd, DType::Bool, DType::Bool, DType::Bool),
           DType::Int64);
  // A scalar meets a tensor as float (float32/16), int64 (integral, non-float64) or float64.
  CHECK_EQ(scalar_operand_dtype(DType::Float16, 2.5), DType::Float32);
  CHECK_EQ(scalar_operand_dtype(DType::Int64, 3.0), DType::Int64);
  CHECK_EQ(scalar_operand_dtype(DType::Int64, 2.5), DType::Float64);
  CHECK_EQ(scalar_operand_dtype(DType::Float64, 3.0), DType::Float64);
  CHECK_EQ(scalar_operand_dtype(DType::Bool, 1e19), DType::Float64);
}

TEST_CASE("cast_to int64 truncates and maps NaN and out-of-range values to INT64_MIN") {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  CHECK_EQ(cast_to<int64_t>(-2.7), -2);
  CHECK_EQ(cast_to<int64_t>(2.7f), 2);
  CHECK_EQ(cast_to<int64_t>(kNaN), kMin);
  CHECK_EQ(cast_to<int64_t>(1e30), kMin);
  CHECK_EQ(cast_to<int64_t>(-kInf), kMin);
  CHECK_EQ(cast_to<int64_t>(-9223372036854775808.0), kMin);  // -2^63 itself fits
}

}  // TEST_SUITE("kernels")
