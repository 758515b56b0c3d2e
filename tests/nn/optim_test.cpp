// Optimizers against hand-computed updates (PyTorch's formulas), their lazy state and its bytes,
// the learning-rate schedule, state dicts, and two small trainings: XOR, and gradient
// accumulation matching one big batch with a lower peak.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <numbers>
#include <vector>

#include "autograd/autograd.h"
#include "engine/nn/functional.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"
#include "tests/support/error_check.h"
#include "tests/support/stats_delta.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::testing::check_value_error;
using memgrad::testing::check_values;
using memgrad::testing::rounded;
using memgrad::testing::StatsDelta;

namespace {

// The gradients of the two steps every update test uses.
const std::vector<double> kGrad1{0.5, -1.0};
const std::vector<double> kGrad2{0.25, 2.0};

Tensor param(std::vector<double> values = {1.0, -2.0}) {
  Tensor p = from_vector(values, {static_cast<int64_t>(values.size())}).to(kFloat32);
  p.requires_grad_();
  return p;
}

void set_grad(const Tensor& p, const std::vector<double>& g) {
  p.set_grad(from_vector(g, {static_cast<int64_t>(g.size())}).to(p.dtype()));
}

// Two steps of `opt` on p = [1, -2] with kGrad1 then kGrad2; checks both results.
void check_two_steps(optim::Optimizer& opt, const Tensor& p, const std::vector<double>& after1,
                     const std::vector<double>& after2) {
  set_grad(p, kGrad1);
  opt.step();
  check_values(p, {2}, after1, 3e-7);
  set_grad(p, kGrad2);
  opt.step();
  check_values(p, {2}, after2, 3e-7);
}

std::shared_ptr<nn::Sequential> mlp(std::vector<int64_t> widths) {
  auto seq = std::make_shared<nn::Sequential>();
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    if (i > 0) seq->push_back(std::make_shared<nn::Tanh>());
    seq->push_back(std::make_shared<nn::Linear>(widths[i], widths[i + 1]));
  }
  return seq;
}

}  // namespace

TEST_SUITE("nn") {
TEST_CASE("SGD without momentum subtracts lr times the gradient") {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.1});
  // p1 = [1, -2] - 0.1 [0.5, -1] = [0.95, -1.9]; p2 = p1 - 0.1 [0.25, 2] = [0.925, -2.1]
  check_two_steps(opt, p, {0.95, -1.9}, {0.925, -2.1});
  CHECK_EQ(opt.state_nbytes(), 0);
}

TEST_CASE("SGD with momentum keeps a buffer seeded with the first gradient") {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  // buf1 = g1 = [0.5, -1]; p1 = [0.95, -1.9]
  // buf2 = 0.9 buf1 + g2 = [0.7, 1.1]; p2 = p1 - 0.1 buf2 = [0.88, -2.01]
  check_two_steps(opt, p, {0.95, -1.9}, {0.88, -2.01});
}

TEST_CASE("SGD dampening scales new gradients but not the first one") {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
  // buf1 = g1 (no dampening on the first step); p1 = [0.95, -1.9]
  // buf2 = 0.9 buf1 + 0.5 g2 = [0.575, 0.1]; p2 = [0.8925, -1.91]
  check_two_steps(opt, p, {0.95, -1.9}, {0.8925, -1.91});
}

TEST_CASE("SGD with Nesterov momentum looks ahead along the buffer") {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  // buf1 = g1; d1 = g1 + 0.9 buf1 = [0.95, -1.9]; p1 = [0.905, -1.81]
  // buf2 = 0.9 g1 + g2 = [0.7, 1.1]; d2 = g2 + 0.9 buf2 = [0.88, 2.99]; p2 = [0.817, -2.109]
  check_two_steps(opt, p, {0.905, -1.81}, {0.817, -2.109});
}

TEST_CASE("SGD weight decay adds wd times the parameter to the gradient") {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.1, .weight_decay = 0.1});
  // d1 = g1 + 0.1 p0 = [0.6, -1.2]; p1 = [0.94, -1.88]
  // d2 = g2 + 0.1 p1 = [0.344, 1.812]; p2 = [0.9056, -2.0612]
  check_two_steps(opt, p, {0.94, -1.88}, {0.9056, -2.0612});
}

TEST_CASE("Adam matches the bias-corrected update") {
  Tensor p = param();
  optim::Adam opt({p}, {.lr = 0.1});
  // Step 1: m = 0.1 g1, v = 0.001 g1^2; m^ = g1, v^ = g1^2, so p1 = p0 - 0.1 sign(g1)
  //   = [0.9, -1.9] (up to eps = 1e-8).
  // Step 2: m = 0.9 m + 0.1 g2 = [0.07, 0.11]; v = 0.999 v + 0.001 g2^2 = [3.1225e-4, 4.999e-3];
  //   m^ = m / 0.19, v^ = v / 0.001999; p2 = p1 - 0.1 m^ / (sqrt(v^) + 1e-8)
  //   = [0.80678204, -1.93661035].
  check_two_steps(opt, p, {0.9, -1.9}, {0.80678204, -1.93661035});
}

TEST_CASE("Adam's weight decay is an L2 term added to the gradient") {
  Tensor p = param();
  optim::Adam opt({p}, {.lr = 0.1, .weight_decay = 0.1});
  // Step 1: g' = g1 + 0.1 p0 = [0.6, -1.2]; p1 = p0 - 0.1 sign(g') = [0.9, -1.9].
  // Step 2: g' = g2 + 0.1 p1 = [0.34, 1.81]; m = [0.088, 0.073];
  //   v = [0.999 * 3.6e-4 + 0.001 * 0.1156, 0.999 * 1.44e-3 + 0.001 * 3.2761];
  //   p2 = [0.80500977, -1.92501788].
  check_two_steps(opt, p, {0.9, -1.9}, {0.80500977, -1.92501788});
}

TEST_CASE("AdamW decays the parameter before the Adam update") {
  Tensor p = param();
  optim::AdamW opt({p}, {.lr = 0.1, .weight_decay = 0.1});
  // Step 1: p *= 1 - 0.1 * 0.1 -> [0.99, -1.98]; minus 0.1 sign(g1) -> [0.89, -1.88].
  // Step 2: p *= 0.99 -> [0.8811, -1.8612]; minus the same Adam step as plain Adam's second
  //   (0.09321796, 0.03661035) -> [0.78788204, -1.89781035].
  check_two_steps(opt, p, {0.89, -1.88}, {0.78788204, -1.89781035});
  optim::AdamW defaults({param()});
  CHECK_EQ(defaults.options().weight_decay, 0.01);
  CHECK_EQ(defaults.lr(), 0.001);
}

TEST_CASE("optimizer state is allocated lazily at the first step") {
  constexpr int64_t kN = 1000;
  const int64_t bytes = rounded(kN * 4);
  Tensor a = param(std::vector<double>(kN, 1.0));
  Tensor b = param(std::vector<double>(kN, 1.0));
  struct Case {
    std::string name;
    std::function<std::unique_ptr<optim::Optimizer>()> make;
    int64_t buffers;
  };
  const std::vector<Case> cases{
      {"sgd",
       [&] {
         return std::make_unique<optim::SGD>(std::vector<Tensor>{a, b},
                                             optim::SGDOptions{.lr = 0.1});
       },
       0},
      {"sgd momentum",
       [&] {
         return std::make_unique<optim::SGD>(std::vector<Tensor>{a, b},
                                             optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
       },
       1},
      {"adam",
       [&] {
         return std::make_unique<optim::Adam>(std::vector<Tensor>{a, b}, optim::AdamOptions{});
       },
       2},
      {"adamw",
       [&] {
         return std::make_unique<optim::AdamW>(std::vector<Tensor>{a, b});
       },
       2},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    std::unique_ptr<optim::Optimizer> opt = c.make();
    set_grad(a, std::vector<double>(kN, 0.5));
    set_grad(b, std::vector<double>(kN, 0.5));
    StatsDelta d(allocator_for(kCPU));
    CHECK_EQ(opt->state_nbytes(), 0);
    opt->step();
    CHECK_EQ(static_cast<int64_t>(opt->state_nbytes()), 2 * c.buffers * bytes);
    CHECK_EQ(d.allocated(), 2 * c.buffers * bytes);
    opt->step();  // later steps allocate nothing
    CHECK_EQ(d.allocated(), 2 * c.buffers * bytes);
    opt->zero_grad();
    CHECK_FALSE(a.grad().defined());
    CHECK_EQ(d.allocated(), 2 * c.buffers * bytes - 2 * bytes);  // the gradients are gone
    opt.reset();
    CHECK_EQ(d.allocated(), -2 * bytes);  // and the state with the optimizer
  }
}

TEST_CASE("parameters without a gradient are skipped and get no state") {
  Tensor a = param(), b = param({3.0, 4.0});
  optim::Adam opt({a, b}, {.lr = 0.1});
  set_grad(a, kGrad1);
  opt.step();
  check_values(a, {2}, {0.9, -1.9}, 1e-6);
  check_values(b, {2}, {3.0, 4.0}, 0.0);
  CHECK_EQ(static_cast<int64_t>(opt.state_nbytes()), 2 * rounded(8));
  CHECK_EQ(opt.state_dict().tensors.size(), 2);  // exp_avg and exp_avg_sq of parameter 0
  // zero_grad(false) keeps a zero gradient: Adam steps with it (PyTorch does too), SGD without
  // momentum or decay leaves the parameter where it is.
  Tensor c = param();
  optim::SGD sgd({c}, {.lr = 0.1});
  set_grad(c, kGrad1);
  sgd.zero_grad(/*set_to_none=*/false);
  REQUIRE(c.grad().defined());
  sgd.step();
  check_values(c, {2}, {1.0, -2.0}, 0.0);
}

TEST_CASE("invalid hyper-parameters throw ValueError") {
  Tensor p = param();
  check_value_error([&] { optim::SGD({p}, {.lr = -0.1}); }, "optim", "learning rate", "-0.1");
  check_value_error([&] { optim::SGD({p}, {.momentum = -0.5}); }, "optim", "momentum", "-0.5");
  check_value_error([&] { optim::SGD({p}, {.weight_decay = -1}); }, "optim", "weight_decay", "-1");
  check_value_error([&] { optim::SGD({p}, {.nesterov = true}); }, "optim", "nesterov", "true");
  CHECK_THROWS_AS(optim::SGD({p}, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                  ValueError);
  check_value_error([&] { optim::Adam({p}, {.beta1 = 1.0}); }, "optim", "betas", "1");
  CHECK_THROWS_AS(optim::Adam({p}, {.beta2 = -0.1}), ValueError);
  check_value_error([&] { optim::Adam({p}, {.eps = -1e-8}); }, "optim", "epsilon", "-1e-08");
  CHECK_THROWS_AS(optim::Adam({p}, {.weight_decay = -0.01}), ValueError);
  CHECK_THROWS_AS(optim::Adam({p}, {.lr = std::nan("")}), ValueError);
  check_value_error([] { optim::SGD({tensor({1.0})}, {}); }, "optim", "params[0]");
  optim::SGD ok({p}, {});
  CHECK_THROWS_AS(ok.set_lr(-1.0), ValueError);
  CHECK_EQ(ok.lr(), 0.01);
}

TEST_CASE("CosineWithWarmup warms up linearly, then decays along a cosine to min_lr") {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 1.0});
  optim::CosineWithWarmup schedule(opt, /*warmup=*/4, /*total=*/12, /*min_lr=*/0.1);
  constexpr double kPi = std::numbers::pi;
  CHECK_EQ(opt.lr(), doctest::Approx(0.25));  // step 0: (0 + 1) / 4 of the base
  // warm-up: 0.25, 0.5, 0.75, 1.0; then 0.1 + 0.45 (1 + cos(pi (s - 4) / 8)).
  const std::vector<double> expected{0.25,
                                     0.5,
                                     0.75,
                                     1.0,
                                     1.0,
                                     0.1 + 0.45 * (1 + std::cos(kPi / 8)),
                                     0.1 + 0.45 * (1 + std::cos(kPi / 4)),
                                     0.1 + 0.45 * (1 + std::cos(3 * kPi / 8)),
                                     0.55,
                                     0.1 + 0.45 * (1 + std::cos(5 * kPi / 8)),
                                     0.1 + 0.45 * (1 + std::cos(3 * kPi / 4)),
                                     0.1 + 0.45 * (1 + std::cos(7 * kPi / 8)),
                                     0.1,
                                     0.1,
                                     0.1};
  for (size_t s = 0; s < expected.size(); ++s) {
    CAPTURE(s);
    CHECK_EQ(schedule.lr_at(static_cast<int64_t>(s)), doctest::Approx(expected[s]));
    CHECK_EQ(schedule.current_step(), static_cast<int64_t>(s));
    CHECK_EQ(opt.lr(), doctest::Approx(expected[s]));
    schedule.step();
  }
  check_value_error([&] { optim::CosineWithWarmup(opt, 5, 4); }, "CosineWithWarmup", "warmup", "5");
  CHECK_THROWS_AS(optim::CosineWithWarmup(opt, 0, 0), ValueError);
}

TEST_CASE("an optimizer restored from a state dict takes identical next steps") {
  for (bool adam : {false, true}) {
    CAPTURE(adam);
    auto make = [&](const Tensor& p) -> std::unique_ptr<optim::Optimizer> {
      if (adam)
        return std::make_unique<optim::Adam>(std::vector<Tensor>{p},
                                             optim::AdamOptions{.lr = 0.05});
      return std::make_unique<optim::SGD>(std::vector<Tensor>{p},
                                          optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
    };
    Tensor a = param();
    auto opt_a = make(a);
    set_grad(a, kGrad1);
    opt_a->step();
    set_grad(a, kGrad2);
    opt_a->step();
    opt_a->set_lr(0.02);
    // A second parameter with a's value and an optimizer restored from a's state.
    Tensor b = param(a.detach().to_vector<double>());
    auto opt_b = make(b);
    opt_b->load_state_dict(opt_a->state_dict());
    CHECK_EQ(opt_b->lr(), 0.02);
    CHECK_EQ(opt_b->state_nbytes(), opt_a->state_nbytes());
    for (const auto& g : {kGrad2, kGrad1, std::vector<double>{-0.3, 0.7}}) {
      set_grad(a, g);
      set_grad(b, g);
      opt_a->step();
      opt_b->step();
      CHECK(equal(a, b));  // bit-exact
    }
    // A state for a parameter of another shape is refused.
    Tensor c = param({1.0, 2.0, 3.0});
    auto opt_c = make(c);
    CHECK_THROWS_WITH_AS(opt_c->load_state_dict(opt_a->state_dict()),
                         doctest::Contains("has shape [2] but the parameter has shape [3]"),
                         CheckpointError);
  }
}

TEST_CASE("a 2-16-2 MLP learns XOR with Adam") {
  manual_seed(42);
  auto model = mlp({2, 16, 2});
  optim::Adam opt(model->parameters(), {.lr = 0.05});
  const Tensor x = tensor({{0.0, 0.0}, {0.0, 1.0}, {1.0, 0.0}, {1.0, 1.0}});
  const Tensor y = tensor({0, 1, 1, 0});
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 300; ++step) {
    const Tensor loss = nn::cross_entropy(model->forward(x), y);
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  CAPTURE(first);
  CAPTURE(last);
  CHECK(first > 0.5);
  CHECK(last < 0.02);
  NoGradGuard no_grad;
  CHECK(equal(model->forward(x).argmax(1), y));
}

TEST_CASE("accumulating four micro-batches equals one 4x batch, at a lower peak") {
  constexpr int64_t kMicro = 128, kIn = 64, kHidden = 256, kClasses = 10;
  manual_seed(8);
  auto model =
      std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
          std::make_shared<nn::Linear>(kIn, kHidden), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(kHidden, kClasses)});
  const Tensor x = randn({4 * kMicro, kIn});
  const Tensor y = randint(0, kClasses, {4 * kMicro}, kInt64);

  // One batch of 512.
  int64_t start = static_cast<int64_t>(memory_allocated(kCPU));
  reset_peak_memory_stats(kCPU);
  nn::cross_entropy(model->forward(x), y).backward();
  const int64_t big_peak = static_cast<int64_t>(max_memory_allocated(kCPU)) - start;
  std::vector<Tensor> big;
  for (const Tensor& p : model->parameters()) big.push_back(p.grad().clone());
  model->zero_grad();

  // Four micro-batches of 128, each loss divided by 4 (the mean over 512 = mean of 4 means).
  start = static_cast<int64_t>(memory_allocated(kCPU));
  reset_peak_memory_stats(kCPU);
  for (int64_t m = 0; m < 4; ++m) {
    const Tensor loss = nn::cross_entropy(model->forward(x.narrow(0, m * kMicro, kMicro)),
                                          y.narrow(0, m * kMicro, kMicro));
    (loss / 4.0).backward();
  }
  const int64_t micro_peak = static_cast<int64_t>(max_memory_allocated(kCPU)) - start;
  const std::vector<Tensor> params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    CAPTURE(i);
    CHECK(allclose(params[i].grad(), big[i], 1e-4, 1e-6));
  }
  CAPTURE(big_peak);
  CAPTURE(micro_peak);
  // The hidden activation (512 x 256 floats = 512 KiB) dominates the big batch; a micro-batch
  // holds a quarter of it, plus the accumulated gradients that both runs hold.
  CHECK(micro_peak < big_peak);
  CHECK(big_peak - micro_peak >= 3 * rounded(kMicro * kHidden * 4));
}

}  // TEST_SUITE("nn")

TEST_CASE("clip_grad_norm_ scales every gradient by max_norm / total, with PyTorch's temporaries") {
  const Device device("sim:6");
  set_sim_capacity(6, size_t{64} << 20);
  const TensorOptions f32 = TensorOptions(kFloat32).with_device(device);
  Tensor a = tensor({3.0, 4.0}, f32).requires_grad_(true);  // gradient norm 5
  Tensor b = tensor({12.0}, f32).requires_grad_(true);      // 12: together 13
  Tensor c = zeros({3}, f32).requires_grad_(true);          // no gradient: skipped
  (a * a / 2.0).sum().backward();                           // grad a = a
  (b * b / 2.0).sum().backward();                           // grad b = b
  const int64_t before = static_cast<int64_t>(memory_allocated(device));
  reset_peak_memory_stats(device);
  const Tensor total = nn::clip_grad_norm_({a, b, c}, 6.5);
  CHECK_EQ(total.item<double>(), doctest::Approx(13.0));
  const double k = 6.5 / (13.0 + 1e-6);
  check_values(a.grad(), {2}, {3.0 * k, 4.0 * k}, 1e-6);
  check_values(b.grad(), {1}, {12.0 * k}, 1e-6);
  // Held at once, at most: a 0-d norm per gradient, and three 0-d tensors: the stack of the
  // norms and the total (the stack is freed once the total is made), then the total, total + 1e-6
  // and the coefficient, then the total, the coefficient and its clamped copy. The total is kept.
  CHECK_EQ(static_cast<int64_t>(max_memory_allocated(device)) - before, 2 * 512 + 3 * 512);
  CHECK_EQ(static_cast<int64_t>(memory_allocated(device)) - before, 512);
  // Under max_norm nothing changes (the coefficient is clamped to 1); the infinity norm is the
  // largest |element|.
  const Tensor inf = nn::clip_grad_norm_({a, b}, 100.0, INFINITY);
  CHECK_EQ(inf.item<double>(), doctest::Approx(12.0 * k));
  check_values(b.grad(), {1}, {12.0 * k}, 1e-6);
  nn::clip_grad_value_({a, b}, 1.0);
  check_values(a.grad(), {2}, {1.0, 1.0}, 0.0);
  check_values(b.grad(), {1}, {1.0}, 0.0);
  CHECK_THROWS_AS(nn::clip_grad_norm_({a}, -1.0), ValueError);
  CHECK_THROWS_AS(nn::clip_grad_value_({a}, -1.0), ValueError);
  a.grad().fill_(NAN);
  CHECK_THROWS_WITH_AS(nn::clip_grad_norm_({a}, 1.0, 2.0, true),
                       doctest::Contains("is non-finite (nan)"), ValueError);
}

TEST_CASE("AdamW's weight decay is 0.01 unless given, Adam's 0, as in PyTorch") {
  Tensor p = ones({1}, TensorOptions().with_requires_grad());
  CHECK_EQ(optim::AdamW({p}, {.lr = 0.1}).options().weight_decay, 0.01);
  CHECK_EQ(optim::AdamW({p}).options().weight_decay, 0.01);
  CHECK_EQ(optim::AdamW({p}, {.weight_decay = 0.0}).options().weight_decay, 0.0);
  CHECK_EQ(optim::Adam({p}, {.lr = 0.1}).options().weight_decay, 0.0);
}
