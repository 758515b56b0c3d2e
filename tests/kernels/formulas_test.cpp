// The other formula headers shared by the CPU and CUDA backends, called directly against closed
// forms: reductions (folds, NaN-propagating max/min, norms, var), softmax, layer norm and cross
// entropy, the optimizer steps and the random draws.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>

#include "kernels/nn_formulas.h"
#include "kernels/optim_formulas.h"
#include "kernels/random_formulas.h"
#include "kernels/reduce_formulas.h"
#include "kernels/softmax_formulas.h"

using namespace memgrad::kernels;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

TEST_SUITE("kernels") {

TEST_CASE("folds start from their identity and combine as sum, prod, max, min, any, all") {
  CHECK_EQ(fold_identity<Fold::Sum, double>(), 0.0);
  CHECK_EQ(fold_identity<Fold::Prod, int64_t>(), 1);
  CHECK_EQ(fold_identity<Fold::Max, double>(), -kInf);
  CHECK_EQ(fold_identity<Fold::Min, float>(), std::numeric_limits<float>::infinity());
  CHECK_EQ(fold_identity<Fold::Max, int64_t>(), std::numeric_limits<int64_t>::lowest());
  CHECK_EQ(fold_identity<Fold::Min, int64_t>(), std::numeric_limits<int64_t>::max());
  CHECK_FALSE(fold_identity<Fold::Any, bool>());
  CHECK(fold_identity<Fold::All, bool>());
  CHECK_EQ(fold_combine<Fold::Sum>(2.0, 3.5), 5.5);
  CHECK_EQ(fold_combine<Fold::Prod>(int64_t{-2}, int64_t{7}), -14);
  CHECK_EQ(fold_combine<Fold::Max>(2.0, 3.5), 3.5);
  CHECK_EQ(fold_combine<Fold::Min>(2.0, 3.5), 2.0);
  CHECK(fold_combine<Fold::Any>(false, true));
  CHECK_FALSE(fold_combine<Fold::All>(false, true));
}

TEST_CASE("max and min let a NaN win and then stay") {
  CHECK(std::isnan(pick<true>(1.0, kNaN)));
  CHECK(std::isnan(pick<true>(kNaN, 5.0)));  // once NaN, stays NaN
  CHECK(std::isnan(pick<false>(kNaN, -5.0)));
  CHECK_EQ(pick<true>(-kInf, -3.0), -3.0);
  CHECK_EQ(pick<false>(int64_t{4}, int64_t{-1}), -1);
}

TEST_CASE("norms: the terms, the combine and the finish of each p") {
  // ||(3, -4)||: p = 2 gives 5, p = 1 gives 7, p = inf 4, p = -inf 3, p = 0 counts 2,
  // p = 3 gives (27 + 64)^(1/3).
  auto norm = [](double p, double a, double b) {
    const NormKind kind = norm_kind(p);
    double v = norm_identity(kind);
    v = norm_combine(kind, v, norm_term(kind, p, a));
    v = norm_combine(kind, v, norm_term(kind, p, b));
    return norm_finish(kind, p, v);
  };
  CHECK_EQ(norm(2.0, 3.0, -4.0), 5.0);
  CHECK_EQ(norm(1.0, 3.0, -4.0), 7.0);
  CHECK_EQ(norm(kInf, 3.0, -4.0), 4.0);
  CHECK_EQ(norm(-kInf, 3.0, -4.0), 3.0);
  CHECK_EQ(norm(0.0, 3.0, 0.0), 1.0);
  CHECK(std::abs(norm(3.0, 3.0, -4.0) - std::cbrt(91.0)) < 1e-14);
  CHECK(std::isnan(norm(kInf, kNaN, 1.0)));
}

TEST_CASE("var divides the squared deviations by max(N - correction, 0)") {
  // x = (1, 2, 3, 4): mean 2.5, squared deviations sum to 5.
  double ss = 0.0;
  for (double x : {1.0, 2.0, 3.0, 4.0}) ss += squared_deviation(x, 2.5);
  CHECK_EQ(ss, 5.0);
  CHECK_EQ(var_divisor(4, 1), 3.0);
  CHECK_EQ(var_divisor(1, 2), 0.0);
  CHECK_EQ(var_finish(ss, var_divisor(4, 0), false), 1.25);
  CHECK_EQ(var_finish(ss, var_divisor(4, 0), true), std::sqrt(1.25));
  CHECK_EQ(var_finish(ss, 0.0, false), kInf);  // N <= correction
}

TEST_CASE("softmax: the output and the gradient of one element") {
  // Row (0, ln 3): max ln 3, sum of exp(x - max) = 1/3 + 1 = 4/3.
  const double max = std::log(3.0), sum = 4.0 / 3.0;
  const double shift = max + std::log(sum), inv = 1.0 / sum;
  CHECK(std::abs(softmax_value(false, 0.0, max, shift, inv) - 0.25) < 1e-15);
  CHECK(std::abs(softmax_value(false, max, max, shift, inv) - 0.75) < 1e-15);
  CHECK(std::abs(softmax_value(true, 0.0, max, shift, inv) - std::log(0.25)) < 1e-15);
  // softmax: gx = y (g - sum(g y)); log_softmax: gx = g - exp(y) sum(g).
  CHECK_EQ(softmax_grad_term(false, 2.0, 0.25), 0.5);
  CHECK_EQ(softmax_grad_term(true, 2.0, 0.25), 2.0);
  CHECK_EQ(softmax_grad_value(false, 2.0, 0.25, 0.5), 0.375);
  CHECK(std::abs(softmax_grad_value(true, 2.0, std::log(0.25), 3.0) - 1.25) < 1e-15);
}

TEST_CASE("layer norm: xhat, the affine output and dx") {
  // x = 3 with mean 1 and rstd 0.5: xhat = 1; y = 1 * 2 + 0.5.
  const double xhat = layer_norm_xhat(3.0, 1.0, 0.5);
  CHECK_EQ(xhat, 1.0);
  CHECK_EQ(layer_norm_value<float>(xhat, true, 2.0f, true, 0.5f), 2.5f);
  CHECK_EQ(layer_norm_value<float>(xhat, false, 0.0f, false, 0.0f), 1.0f);
  // Without a bias a -0 stays -0 (an added 0 would make it +0).
  CHECK(std::signbit(layer_norm_value<float>(-0.0, false, 0.0f, false, 0.0f)));
  // dx = rstd (gw - mg - xhat mgx) = 0.5 (3 - 1 - 2 * 0.5) = 0.5.
  CHECK_EQ(layer_norm_dx(0.5, 3.0, 1.0, 2.0, 0.5), 0.5);
}

TEST_CASE("cross entropy: the smoothed loss and the logit gradient") {
  // Two classes, log_probs (ln 0.25, ln 0.75), target 1: loss -ln 0.75 without smoothing;
  // with s = 0.2: -(0.8) ln 0.75 - 0.1 (ln 0.25 + ln 0.75).
  const double lp0 = std::log(0.25), lp1 = std::log(0.75);
  CHECK(std::abs(cross_entropy_loss(lp1, lp0 + lp1, 0.0, 2) + lp1) < 1e-15);
  CHECK(std::abs(cross_entropy_loss(lp1, lp0 + lp1, 0.2, 2) - (-0.8 * lp1 - 0.1 * (lp0 + lp1))) <
        1e-15);
  // d/dlogit = g (p - y): target class 0.75 - 1, other class 0.25 - 0; smoothing moves s / C
  // of the target's weight to every class.
  CHECK(std::abs(cross_entropy_grad(2.0, lp1, true, 0.0, 0.0) - (-0.5)) < 1e-15);
  CHECK(std::abs(cross_entropy_grad(2.0, lp0, false, 0.0, 0.0) - 0.5) < 1e-15);
  CHECK(std::abs(cross_entropy_grad(1.0, lp1, true, 0.2, 0.1) - (0.75 - 0.9)) < 1e-15);
  CHECK_EQ(cross_entropy_grad(0.0, lp0, false, 0.2, 0.1), 0.0);  // an ignored row
}

TEST_CASE("sgd_update: plain, weight decay, momentum and Nesterov steps") {
  // Plain: w - lr g = 1 - 0.1 * 0.5.
  auto plain = sgd_constants<double>(0.1, 0.0, 0.0, 0.0, false, false);
  CHECK_EQ(sgd_update(plain, 1.0, 0.5, 0.0).param, 1.0 - 0.1 * 0.5);
  // Weight decay 0.5: g' = 0.5 + 0.5 * 1 = 1, so w = 0.9.
  auto decay = sgd_constants<double>(0.1, 0.0, 0.0, 0.5, false, false);
  CHECK_EQ(sgd_update(decay, 1.0, 0.5, 0.0).param, 0.9);
  // Momentum 0.5, first step: buf = g = 2 (the old buffer is not read), w = 1 - 0.25 * 2.
  auto first = sgd_constants<double>(0.25, 0.5, 0.0, 0.0, false, true);
  const SgdElement<double> e1 = sgd_update(first, 1.0, 2.0, kNaN);
  CHECK_EQ(e1.buf, 2.0);
  CHECK_EQ(e1.param, 0.5);
  // Later step with dampening 0.5: buf = 0.5 * 2 + 0.5 * 2 = 2; Nesterov: d = 2 + 0.5 * 2 = 3.
  auto later = sgd_constants<double>(0.25, 0.5, 0.5, 0.0, true, false);
  const SgdElement<double> e2 = sgd_update(later, 1.0, 2.0, 2.0);
  CHECK_EQ(e2.buf, 2.0);
  CHECK_EQ(e2.param, 1.0 - 0.25 * 3.0);
  CHECK_EQ(sgd_buffer(later, 2.0, 2.0), e2.buf);
}

TEST_CASE("adam_update: the first step moves each parameter by about lr against its gradient") {
  // Step 1: m = (1 - b1) g and v = (1 - b2) g^2, bias-corrected to g and g^2, so the step is
  // lr g / (|g| + eps).
  const double lr = 0.1, eps = 1e-8;
  auto adam = adam_constants<double>(lr, 0.9, 0.999, eps, 0.0, false, 1);
  const AdamElement<double> e = adam_update(adam, 1.0, 0.5, 0.0, 0.0);
  CHECK(std::abs(e.exp_avg - 0.05) < 1e-16);
  CHECK(std::abs(e.exp_avg_sq - 0.00025) < 1e-16);
  CHECK(std::abs(e.param - (1.0 - lr * 0.5 / (0.5 + eps))) < 1e-15);
  // AdamW decays the parameter by 1 - lr wd before the step; Adam adds wd w to the gradient.
  auto adamw = adam_constants<double>(lr, 0.9, 0.999, eps, 0.5, true, 1);
  CHECK(std::abs(adam_update(adamw, 1.0, 0.5, 0.0, 0.0).param - (0.95 - lr * 0.5 / (0.5 + eps))) <
        1e-15);
  auto l2 = adam_constants<double>(lr, 0.9, 0.999, eps, 0.5, false, 1);
  CHECK(std::abs(adam_update(l2, 1.0, 0.5, 0.0, 0.0).exp_avg - 0.1) < 1e-16);  // g' = 1
}

TEST_CASE("random draws map Philox words to their distributions") {
  // uniform: from + span u with u = word / 2^32 (float64) or (word >> 8) / 2^24.
  CHECK_EQ(uniform_draw(0u, 32, 2.0, 3.0), 2.0);
  CHECK_EQ(uniform_draw(0x80000000u, 32, 2.0, 3.0), 3.5);
  CHECK_EQ(uniform_draw(0xFFFFFFFFu, 24, 0.0, 1.0), 1.0 - std::ldexp(1.0, -24));
  // float16 draws 11 bits: the largest value, 1 - 2^-11, is a float16 below 1.
  CHECK_EQ(uniform_bits(false, true), 11);
  CHECK_EQ(uniform_draw(0xFFFFFFFFu, 11, 0.0, 1.0), 1.0 - std::ldexp(1.0, -11));
  // randint: low + word mod range; bernoulli: u < p.
  CHECK_EQ(randint_draw(17u, -5, 10), 2.0);
  CHECK_EQ(bernoulli_draw(0u, 0.0), 0.0);
  CHECK_EQ(bernoulli_draw(0xFFFFFFFFu, 1.0), 1.0);
  CHECK_EQ(bernoulli_draw(0x80000000u, 0.5), 0.0);  // u = 0.5 is not < 0.5
  // normal: z = sqrt(-2 ln u1) (cos or sin)(2 pi u2), u1 = (w0 + 1) / (2^32 + 1),
  // u2 = w1 / 2^32. Words (2^31 - 1, 0): angle 0, so the sine draw is exactly the mean.
  Philox4 r{{0x7FFFFFFFu, 0u, 0u, 0u}};
  const double radius = std::sqrt(-2.0 * std::log(2147483648.0 * (1.0 / 4294967297.0)));
  CHECK_EQ(normal_draw(r, 1, 1.5, 2.0), 1.5);
  CHECK(std::abs(normal_draw(r, 0, 1.5, 2.0) - (1.5 + 2.0 * radius)) < 1e-14);
  // Words (2^31 - 1, 2^30): angle pi / 2, so the cosine draw is ~0 and the sine draw the radius.
  Philox4 s{{0x7FFFFFFFu, 0x40000000u, 0u, 0u}};
  CHECK(std::abs(normal_draw(s, 0, 0.0, 1.0)) < 1e-15);
  CHECK(std::abs(normal_draw(s, 1, 0.0, 1.0) - radius) < 1e-15);
}

}  // TEST_SUITE("kernels")
