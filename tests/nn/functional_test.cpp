// The nn functional ops against hand-computed values, finite differences (gradcheck in float64)
// and closed-form gradients, with their typed errors and what each keeps in memory.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "autograd/autograd.h"
#include "engine/nn/functional.h"
#include "tests/support/error_check.h"
#include "tests/support/stats_delta.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::nn::Reduction;
using memgrad::testing::caught;
using memgrad::testing::check_dtypes;
using memgrad::testing::check_shape;
using memgrad::testing::check_value_error;
using memgrad::testing::check_values;
using memgrad::testing::rounded;
using memgrad::testing::StatsDelta;

namespace {

using Rows = std::vector<std::vector<double>>;

// Three rows of four logits and their classes.
const Rows kLogits{{1.0, 2.0, 0.5, -1.0}, {0.0, 0.0, 0.0, 0.0}, {3.0, -2.0, 1.0, 0.25}};
const std::vector<int64_t> kTargets{1, 3, 0};

Tensor logits_tensor(const Rows& rows, DType dtype = kFloat32) {
  std::vector<double> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return from_vector(flat,
                     {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())})
      .to(dtype);
}

Tensor targets(const std::vector<int64_t>& t) {
  return from_vector(t, {static_cast<int64_t>(t.size())});
}

// log softmax of one row: x - log(sum(exp(x))).
std::vector<double> log_softmax_row(const std::vector<double>& x) {
  double sum = 0.0;
  for (double v : x) sum += std::exp(v);
  std::vector<double> out;
  for (double v : x) out.push_back(v - std::log(sum));
  return out;
}

// -(1 - eps) lp[t] - eps / C sum(lp): PyTorch's label-smoothed cross entropy of one row.
double row_loss(const std::vector<double>& x, int64_t t, double eps = 0.0) {
  const std::vector<double> lp = log_softmax_row(x);
  double sum = 0.0;
  for (double v : lp) sum += v;
  return -(1.0 - eps) * lp[static_cast<size_t>(t)] - eps / static_cast<double>(x.size()) * sum;
}

Tensor leaf64(const Tensor& t) {
  Tensor out = t.to(kFloat64).contiguous().clone();
  out.requires_grad_();
  return out;
}

void check_gradcheck(const autograd::TestFunction& fn, const std::vector<Tensor>& inputs,
                     const char* name) {
  const autograd::GradcheckResult r = autograd::gradcheck(fn, inputs, name);
  CHECK_MESSAGE(r.ok, r.report);
}

}  // namespace

TEST_SUITE("nn") {
TEST_CASE("cross_entropy equals log-softmax followed by NLL for every reduction") {
  const double l0 = row_loss(kLogits[0], 1), l1 = row_loss(kLogits[1], 3),
               l2 = row_loss(kLogits[2], 0);
  CHECK(l1 == doctest::Approx(std::log(4.0)));  // uniform logits: -log(1/4)
  const Tensor x = logits_tensor(kLogits), t = targets(kTargets);
  check_values(nn::cross_entropy(x, t), {}, {(l0 + l1 + l2) / 3}, 1e-6);
  check_values(nn::cross_entropy(x, t, 0.0, -100, Reduction::Sum), {}, {l0 + l1 + l2}, 1e-5);
  check_values(nn::cross_entropy(x, t, 0.0, -100, Reduction::None), {3}, {l0, l1, l2}, 1e-6);
  // float64 logits give float64 losses.
  const Tensor loss64 = nn::cross_entropy(logits_tensor(kLogits, kFloat64), t);
  CHECK_EQ(loss64.dtype(), kFloat64);
  CHECK(loss64.item<double>() == doctest::Approx((l0 + l1 + l2) / 3).epsilon(1e-12));
  // One sample: logits (C) and a 0-d target.
  check_values(nn::cross_entropy(x[2], scalar_tensor(int64_t{0}, kInt64)), {}, {l2}, 1e-6);
  check_values(
      nn::cross_entropy(x[2], scalar_tensor(int64_t{0}, kInt64), 0.0, -100, Reduction::None), {},
      {l2}, 1e-6);
}

TEST_CASE("cross_entropy with label smoothing mixes in the mean log-probability") {
  const double eps = 0.1;
  const Tensor x = logits_tensor(kLogits), t = targets(kTargets);
  const double expected =
      (row_loss(kLogits[0], 1, eps) + row_loss(kLogits[1], 3, eps) + row_loss(kLogits[2], 0, eps)) /
      3;
  check_values(nn::cross_entropy(x, t, eps), {}, {expected}, 1e-6);
  // Smoothing 1: the target does not matter any more.
  const Tensor a = nn::cross_entropy(x, t, 1.0);
  const Tensor b = nn::cross_entropy(x, targets({0, 0, 0}), 1.0);
  CHECK(a.item<double>() == doctest::Approx(b.item<double>()));
  check_value_error([&] { (void)nn::cross_entropy(x, t, 1.5); }, "cross_entropy", "label_smoothing",
                    "1.5");
  CHECK_THROWS_AS(nn::cross_entropy(x, t, -0.1), ValueError);
}

TEST_CASE("cross_entropy leaves ignore_index rows out of the sum and of the mean's count") {
  const Tensor x = logits_tensor(kLogits);
  const double l0 = row_loss(kLogits[0], 1), l2 = row_loss(kLogits[2], 0);
  const Tensor t = targets({1, -100, 0});
  check_values(nn::cross_entropy(x, t), {}, {(l0 + l2) / 2}, 1e-6);  // mean over 2 rows, not 3
  check_values(nn::cross_entropy(x, t, 0.0, -100, Reduction::Sum), {}, {l0 + l2}, 1e-5);
  check_values(nn::cross_entropy(x, t, 0.0, -100, Reduction::None), {3}, {l0, 0.0, l2}, 1e-6);
  // Another ignore_index, also with smoothing (ignored rows contribute nothing at all).
  const Tensor t2 = targets({1, 7, 0});
  const double s0 = row_loss(kLogits[0], 1, 0.2), s2 = row_loss(kLogits[2], 0, 0.2);
  check_values(nn::cross_entropy(x, t2, 0.2, 7), {}, {(s0 + s2) / 2}, 1e-6);
  // Every row ignored: the mean is 0/0, NaN as in PyTorch.
  CHECK(std::isnan(nn::cross_entropy(x, targets({-100, -100, -100})).item<double>()));
  // Ignored rows get a zero gradient.
  Tensor leaf = logits_tensor(kLogits);
  leaf.requires_grad_();
  nn::cross_entropy(leaf, t).backward();
  check_values(leaf.grad()[1], {4}, {0, 0, 0, 0}, 0.0);
}

TEST_CASE("cross_entropy's gradient passes gradcheck in float64") {
  const Tensor t = targets(kTargets);
  const Tensor x = leaf64(logits_tensor(kLogits) * 0.7);
  check_gradcheck([&](const std::vector<Tensor>& in) { return nn::cross_entropy(in[0], t); }, {x},
                  "cross_entropy mean");
  check_gradcheck(
      [&](const std::vector<Tensor>& in) {
        return nn::cross_entropy(in[0], t, 0.0, -100, Reduction::Sum);
      },
      {x}, "cross_entropy sum");
  check_gradcheck(
      [&](const std::vector<Tensor>& in) {
        return nn::cross_entropy(in[0], t, 0.0, -100, Reduction::None);
      },
      {x}, "cross_entropy none");
  check_gradcheck(
      [&](const std::vector<Tensor>& in) {
        return nn::cross_entropy(in[0], targets({1, 2, -100}), 0.3);
      },
      {x}, "cross_entropy smoothing + ignore_index");
  const Tensor single = leaf64(tensor({0.3, -1.2, 2.0}));
  check_gradcheck(
      [&](const std::vector<Tensor>& in) {
        return nn::cross_entropy(in[0], scalar_tensor(int64_t{2}, kInt64));
      },
      {single}, "cross_entropy of one sample");
}

TEST_CASE("cross_entropy's gradient is (softmax - onehot) / N") {
  manual_seed(11);
  constexpr int64_t kN = 6, kC = 5;
  Tensor x = randn({kN, kC});
  x.requires_grad_();
  const std::vector<int64_t> t{0, 4, 2, 2, 1, 3};
  nn::cross_entropy(x, targets(t)).backward();
  const std::vector<double> v = x.detach().to_vector<double>();
  std::vector<double> expected;
  for (int64_t r = 0; r < kN; ++r) {
    const std::vector<double> row(v.begin() + r * kC, v.begin() + (r + 1) * kC);
    const std::vector<double> lp = log_softmax_row(row);
    for (int64_t c = 0; c < kC; ++c) {
      expected.push_back(
          (std::exp(lp[static_cast<size_t>(c)]) - (c == t[static_cast<size_t>(r)] ? 1.0 : 0.0)) /
          kN);
    }
  }
  check_values(x.grad(), {kN, kC}, expected, 1e-7);
}

TEST_CASE("cross_entropy rejects bad targets, dtypes and shapes with typed errors") {
  const Tensor x = logits_tensor(kLogits);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, targets({1, 4, 0})),
                       doctest::Contains("[cross_entropy] target 4 is out of bounds for 4 "
                                         "classes (at row 1)"),
                       IndexError);
  // The fields: the bad class index, the number of classes (dim 1's size) and the row.
  const auto negative = caught<IndexError>([&] {
    (void)nn::cross_entropy(x, targets({-1, 0, 0}));
  });
  REQUIRE(negative);
  CHECK_EQ(negative->op(), "cross_entropy");
  CHECK(negative->index() == -1);
  CHECK(negative->size() == 4);
  CHECK(negative->dim() == 1);
  CHECK(negative->position() == 0);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, tensor({1.0, 3.0, 0.0})),
                       doctest::Contains("target must hold int64 class indices, got float32"),
                       DTypeError);
  const auto logits_dtype =
      caught<DTypeError>([&] { (void)nn::cross_entropy(x.to(kInt64), targets(kTargets)); });
  REQUIRE(logits_dtype);
  CHECK_EQ(logits_dtype->op(), "cross_entropy");
  check_dtypes(logits_dtype->dtypes(), {kInt64});
  CHECK_THROWS_WITH_AS(nn::cross_entropy(zeros({2, 3, 4}), targets({0, 1})),
                       doctest::Contains("expected input of shape (N, C) or (C), got [2, 3, 4]"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, targets({0, 1})),
                       doctest::Contains("expected target of shape (3), got [2]"), ShapeError);
  const auto target_shape = caught<ShapeError>([&] {
    (void)nn::cross_entropy(x, zeros({3, 1}, kInt64));
  });
  REQUIRE(target_shape);
  CHECK_EQ(target_shape->op(), "cross_entropy");
  check_shape(target_shape->lhs(), {3, 4}, "lhs");
  check_shape(target_shape->rhs(), {3, 1}, "rhs");
  CHECK_THROWS_AS(nn::cross_entropy(x.to(Device("sim:0")), targets(kTargets)), DeviceError);
  CHECK_THROWS_AS(nn::cross_entropy(Tensor(), targets(kTargets)), Error);
}

TEST_CASE("cross_entropy keeps exactly the log-probabilities for backward") {
  constexpr int64_t kN = 50, kC = 30;
  const int64_t log_probs = rounded(kN * kC * 4), loss = rounded(4), per_row = rounded(kN * 4);
  Tensor x = randn({kN, kC});
  const Tensor t = randint(0, kC, {kN}, kInt64);
  {
    // Without a graph only the 0-d loss survives: the log-probabilities, the per-row losses,
    // their sum and the count of non-ignored rows are all temporaries.
    StatsDelta d(allocator_for(kCPU));
    const Tensor l = nn::cross_entropy(x, t);
    CHECK_EQ(d.allocated(), loss);
  }
  x.requires_grad_();
  StatsDelta d(allocator_for(kCPU));
  reset_peak_memory_stats(kCPU);
  const int64_t start = static_cast<int64_t>(memory_allocated(kCPU));
  Tensor l = nn::cross_entropy(x, t);
  // Kept: the saved log-probabilities (N x C floats) and the loss. The per-row losses (N floats)
  // were freed before returning; they did exist together with the log-probabilities.
  CHECK_EQ(d.allocated(), log_probs + loss);
  const int64_t peak = static_cast<int64_t>(max_memory_allocated(kCPU)) - start;
  CHECK(peak >= log_probs + per_row + loss);
  // ... and nothing N x C besides: the peak stays below a second copy of the log-probabilities.
  CHECK(peak < 2 * log_probs);
  l.backward();
  // backward allocated the gradient (N x C, now x.grad) and freed the saved log-probabilities,
  // so the total is unchanged.
  CHECK_EQ(d.allocated(), log_probs + loss);
  REQUIRE(x.grad().defined());
  CHECK_EQ(static_cast<int64_t>(x.grad().storage().allocated_nbytes()), log_probs);
  x.set_grad(Tensor());
  CHECK_EQ(d.allocated(), loss);
  l = Tensor();
  CHECK_EQ(d.allocated(), 0);
  // Reduction::None returns the per-row losses themselves and keeps the log-probabilities.
  Tensor rows = nn::cross_entropy(x, t, 0.0, -100, Reduction::None);
  CHECK_EQ(d.allocated(), log_probs + per_row);
}

TEST_CASE("layer_norm normalises over several trailing dims with weight and bias") {
  // x = 1..6 as (1, 2, 3) normalised over [2, 3]: mean 3.5, biased variance 35/12.
  const Tensor x = arange(1, 7, 1, kFloat32).view({1, 2, 3});
  const double s = 1.0 / std::sqrt(35.0 / 12.0 + 1e-5);
  std::vector<double> expected;
  for (int i = 1; i <= 6; ++i) expected.push_back((i - 3.5) * s);
  check_values(nn::layer_norm(x, {2, 3}), {1, 2, 3}, expected, 1e-5);
  const Tensor w = full({2, 3}, 2.0), b = full({2, 3}, -1.0);
  std::vector<double> affine;
  for (double e : expected) affine.push_back(2 * e - 1);
  check_values(nn::layer_norm(x, {2, 3}, w, b), {1, 2, 3}, affine, 1e-5);
  // A constant row normalises to zeros (eps keeps it finite).
  check_values(nn::layer_norm(full({2, 3}, 5.0), {3}), {2, 3}, std::vector<double>(6, 0.0));
  CHECK_THROWS_WITH_AS(nn::layer_norm(x, {3, 2}),
                       doctest::Contains("given normalized_shape=[3, 2]"), ShapeError);
  CHECK_THROWS_AS(nn::layer_norm(x, {}), ShapeError);
  const auto weight = caught<ShapeError>([&] { (void)nn::layer_norm(x, {3}, ones({4})); });
  REQUIRE(weight);
  CHECK_EQ(weight->op(), "layer_norm");
  check_shape(weight->expected(), {3}, "expected");
  check_shape(weight->actual(), {4}, "actual");
  CHECK_THROWS_AS(nn::layer_norm(x.to(kInt64), {3}), DTypeError);
}

TEST_CASE("layer_norm's gradients for input, weight and bias pass gradcheck") {
  manual_seed(2);
  const Tensor x = leaf64(randn({3, 4}));
  const Tensor w = leaf64(randn({4}));
  const Tensor b = leaf64(randn({4}));
  check_gradcheck(
      [](const std::vector<Tensor>& in) { return nn::layer_norm(in[0], {4}, in[1], in[2]); },
      {x, w, b}, "layer_norm affine");
  check_gradcheck([](const std::vector<Tensor>& in) { return nn::layer_norm(in[0], {4}); }, {x},
                  "layer_norm plain");
  const Tensor x3 = leaf64(randn({2, 2, 3}));
  const Tensor w2 = leaf64(randn({2, 3}));
  check_gradcheck(
      [](const std::vector<Tensor>& in) {
        return nn::layer_norm(in[0], {2, 3}, in[1]);
      },
      {x3, w2}, "layer_norm over two dims");
}

TEST_CASE("layer_norm's float32 gradients on many rows match the same rows in float64") {
  // 700 rows of 100: above the kernel's threading threshold, and 100 columns are not a whole
  // number of its 16-column blocks. The float64 run is the reference for the float32 one.
  manual_seed(3);
  const Tensor x = randn({700, 100});
  const Tensor w = randn({100});
  const Tensor b = randn({100});
  const Tensor dy = randn({700, 100});
  auto gradients = [&](DType dtype) {
    std::vector<Tensor> in = {x.to(dtype).clone(), w.to(dtype).clone(), b.to(dtype).clone()};
    for (Tensor& t : in) t.requires_grad_();
    (nn::layer_norm(in[0], {100}, in[1], in[2]) * dy.to(dtype)).sum().backward();
    return std::vector<Tensor>{in[0].grad(), in[1].grad(), in[2].grad()};
  };
  const std::vector<Tensor> single = gradients(kFloat32), reference = gradients(kFloat64);
  const char* names[] = {"input", "weight", "bias"};
  for (size_t k = 0; k < 3; ++k) {
    CAPTURE(names[k]);
    // dweight and dbias sum 700 float32 products: a looser tolerance than dx.
    check_values(single[k], reference[k].sizes(), reference[k].to_vector<double>(),
                 k == 0 ? 1e-4 : 2e-3);
  }
}

TEST_CASE("layer_norm's weight and bias gradients on many rows are column sums of dy xhat and dy") {
  // The backward adds dweight and dbias over chunks of rows (700 rows: 10 whole chunks of 64
  // and a last of 60). The reference: the same sums by the reduction kernel, with xhat from the
  // forward of a layer norm without weight and bias.
  manual_seed(5);
  const TensorOptions f64(kFloat64);
  const Tensor x = randn({700, 100}, f64), dy = randn({700, 100}, f64);
  Tensor w = randn({100}, f64), b = randn({100}, f64);
  w.requires_grad_();
  b.requires_grad_();
  (nn::layer_norm(x, {100}, w, b) * dy).sum().backward();
  const Tensor xhat = nn::layer_norm(x, {100});
  check_values(b.grad(), {100}, dy.sum(Shape{0}).to_vector<double>(), 1e-9);
  check_values(w.grad(), {100}, (dy * xhat).sum(Shape{0}).to_vector<double>(), 1e-9);
}

TEST_CASE(
    "gelu's tanh form has the float64 rule's float32 gradient on contiguous and strided rows") {
  // d gelu / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 0.044715 x^2),
  // t = tanh(sqrt(2/pi) (x + 0.044715 x^3)). Rows of 2500 cross the kernel's 1024-element
  // blocks; a step-2 slice takes the strided path. The tolerance covers the far negative tail:
  // the contiguous path's tanh (Eigen's, as in the forward) is exactly -1 below about -7.9, so
  // there (x < -4.8) a gradient of at most 3e-6 comes out as 0.
  const Tensor base = linspace(-6.0, 6.0, 5000).reshape({2, 2500});
  const Tensor g = linspace(-1.0, 1.0, 5000).reshape({2, 2500});
  auto expected = [&](const Tensor& x, const Tensor& grad) {
    const std::vector<double> xs = x.to_vector<double>(), gs = grad.to_vector<double>();
    std::vector<double> out;
    const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double v = xs[i], t = std::tanh(k * (v + c * v * v * v));
      out.push_back(gs[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * c * v * v)));
    }
    return out;
  };
  SUBCASE("contiguous") {
    Tensor x = base.clone();
    x.requires_grad_();
    (gelu(x, true) * g).sum().backward();
    check_values(x.grad(), {2, 2500}, expected(base, g), 4e-6);
  }
  SUBCASE("strided") {
    Tensor x = base.clone();
    x.requires_grad_();
    const Tensor half = x.slice(1, 0, 2500, 2);
    (gelu(half, true) * g.slice(1, 0, 2500, 2)).sum().backward();
    const Tensor grad = x.grad().slice(1, 0, 2500, 2);
    check_values(grad, {2, 1250}, expected(base.slice(1, 0, 2500, 2), g.slice(1, 0, 2500, 2)),
                 4e-6);
  }
}

TEST_CASE("layer_norm keeps its row statistics for backward only when recording") {
  constexpr int64_t kRows = 200, kCols = 64;
  const int64_t y = rounded(kRows * kCols * 4), stats = rounded(kRows * 4);
  Tensor x = randn({kRows, kCols});
  {
    StatsDelta d(allocator_for(kCPU));
    const Tensor out = nn::layer_norm(x, {kCols});
    CHECK_EQ(d.allocated(), y);  // mean and rstd were freed with the call
  }
  x.requires_grad_();
  StatsDelta d(allocator_for(kCPU));
  const Tensor out = nn::layer_norm(x, {kCols});
  CHECK_EQ(d.allocated(), y + 2 * stats);  // y, plus the saved mean and rstd (float32 per row)
  out.backward(ones({kRows, kCols}));
  CHECK_EQ(d.allocated(), 2 * y);  // y and x.grad; the statistics were released
}

TEST_CASE("mse_loss gives the mean, sum or elementwise squared error and its gradient") {
  const Tensor t = tensor({0.0, 2.0, 5.0});
  Tensor x = tensor({1.0, 2.0, 3.0});
  x.requires_grad_();
  // (x - t)^2 = 1, 0, 4
  check_values(nn::mse_loss(x, t), {}, {5.0 / 3.0});
  check_values(nn::mse_loss(x, t, Reduction::Sum), {}, {5.0});
  check_values(nn::mse_loss(x, t, Reduction::None), {3}, {1, 0, 4});
  nn::mse_loss(x, t).backward();
  check_values(x.grad(), {3}, {2.0 / 3.0, 0.0, -4.0 / 3.0});  // 2 (x - t) / N
  const Tensor a = leaf64(tensor({{0.5, -1.0}, {2.0, 0.1}}));
  const Tensor b = leaf64(tensor({{0.0, 1.0}, {1.0, 1.0}}));
  check_gradcheck([](const std::vector<Tensor>& in) { return nn::mse_loss(in[0], in[1]); }, {a, b},
                  "mse_loss");
  CHECK_THROWS_WITH_AS(nn::mse_loss(x, tensor({1.0, 2.0})),
                       doctest::Contains("[mse_loss] input [3] and target [2] must have the same "
                                         "shape"),
                       ShapeError);
}

}  // TEST_SUITE("nn")
