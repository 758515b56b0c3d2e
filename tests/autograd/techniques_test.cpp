// The memory techniques: activation checkpointing, float16 autocast, loss scaling.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/autograd.h"
#include "engine/nn/functional.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"
#include "tests/support/stats_delta.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::testing::check_values;

namespace {

// n layers of Linear(width, width) + ReLU (+ dropout), as a module list.
std::vector<std::shared_ptr<nn::UnaryModule>> deep_mlp(int n, int64_t width, double dropout) {
  std::vector<std::shared_ptr<nn::UnaryModule>> layers;
  for (int i = 0; i < n; ++i) {
    layers.push_back(std::make_shared<nn::Linear>(width, width));
    layers.push_back(std::make_shared<nn::ReLU>());
    if (dropout > 0) layers.push_back(std::make_shared<nn::Dropout>(dropout));
  }
  return layers;
}

std::vector<std::vector<float>> grads_of(const std::vector<std::shared_ptr<nn::UnaryModule>>& m) {
  std::vector<std::vector<float>> out;
  for (const auto& layer : m) {
    for (const Tensor& p : layer->parameters()) out.push_back(p.grad().to_vector<float>());
  }
  return out;
}

void zero_grads(const std::vector<std::shared_ptr<nn::UnaryModule>>& m) {
  for (const auto& layer : m) layer->zero_grad();
}

Tensor run_plain(const std::vector<std::shared_ptr<nn::UnaryModule>>& m, const Tensor& x) {
  Tensor h = x;
  for (const auto& layer : m) h = layer->forward(h);
  return h;
}

}  // namespace

TEST_SUITE("autograd") {

TEST_CASE("checkpointed gradients are bit-exact with the plain run, dropout included") {
  manual_seed(7);
  const auto layers = deep_mlp(4, 32, /*dropout=*/0.3);
  const Tensor x = randn({16, 32});
  manual_seed(123);
  run_plain(layers, x).sum().backward();
  const auto plain = grads_of(layers);
  zero_grads(layers);
  manual_seed(123);  // the same generator state at the start of the forward
  autograd::checkpoint_sequential(layers, 3, x).sum().backward();
  const auto ckpt = grads_of(layers);
  REQUIRE_EQ(plain.size(), ckpt.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    CAPTURE(i);
    CHECK(plain[i] == ckpt[i]);  // exactly equal, element for element
  }
}

TEST_CASE("checkpointing keeps fewer activations: peak and saved bytes drop") {
  manual_seed(3);
  const auto layers = deep_mlp(8, 64, 0.0);
  const Tensor x = randn({128, 64}, TensorOptions().with_requires_grad());
  PolicyAllocator& alloc = allocator_for(kCPU);
  auto measure = [&](int segments) {
    zero_grads(layers);
    const int64_t before = static_cast<int64_t>(alloc.memory_allocated());
    alloc.reset_peak_stats();
    Tensor y =
        segments == 0 ? run_plain(layers, x) : autograd::checkpoint_sequential(layers, segments, x);
    const int64_t kept = static_cast<int64_t>(alloc.memory_allocated()) - before;
    y.sum().backward();
    const int64_t peak = alloc.stats().allocated_bytes.all().peak - before;
    return std::pair<int64_t, int64_t>{kept, peak};
  };
  const auto [plain_kept, plain_peak] = measure(0);
  const auto [ckpt_kept, ckpt_peak] = measure(4);
  // One (128 x 64) float activation is 32 KiB. Plain: per layer the ReLU's output stays (saved
  // by the ReLU and by the next Linear; the Linear's own output is freed once the ReLU ran):
  // 8 activations. Checkpointed with 4 segments of 4 modules (2 layers each): the 3 segment
  // boundaries, and the last segment's 2 activations.
  const int64_t act = 128 * 64 * 4;
  CHECK_EQ(plain_kept, 8 * act);
  CHECK_EQ(ckpt_kept, (3 + 2) * act);
  CHECK_LT(ckpt_peak, plain_peak);
}

TEST_CASE("checkpoint inside autocast recomputes in float16 too") {
  manual_seed(11);
  nn::Linear lin(16, 16);
  const Tensor x = randn({4, 16});
  Tensor y;
  {
    autograd::AutocastGuard autocast;
    y = autograd::checkpoint([&](const Tensor& h) { return lin.forward(h); }, x);
    CHECK_EQ(y.dtype(), kFloat16);
  }
  y.to(kFloat32).sum().backward();
  CHECK(lin.weight().grad().defined());
  CHECK_EQ(lin.weight().grad().dtype(), kFloat32);
}

TEST_CASE("checkpoint with backward inside the autocast region gives the plain run's gradients") {
  // The segment's forward runs without grad, so the weight's float16 cast is first made and
  // cached there; the recomputation in this backward, inside the region, takes that cast, which
  // must still lead back to the weight.
  manual_seed(13);
  nn::Linear lin(16, 16);
  const Tensor x = randn({4, 16});
  {
    autograd::AutocastGuard autocast;
    autograd::checkpoint([&](const Tensor& h) { return lin.forward(h); }, x)
        .to(kFloat32)
        .sum()
        .backward();
  }
  REQUIRE(lin.weight().grad().defined());
  REQUIRE(lin.bias().grad().defined());
  const std::vector<float> weight = lin.weight().grad().to_vector<float>();
  const std::vector<float> bias = lin.bias().grad().to_vector<float>();
  lin.zero_grad();
  {
    autograd::AutocastGuard autocast;
    lin.forward(x).to(kFloat32).sum().backward();
  }
  CHECK(lin.weight().grad().to_vector<float>() == weight);
  CHECK(lin.bias().grad().to_vector<float>() == bias);
}

TEST_CASE("a cast autocast cached under no_grad still leads back to the parameter") {
  manual_seed(14);
  nn::Linear lin(16, 16);
  const Tensor x = randn({4, 16});
  autograd::AutocastGuard autocast;
  {
    NoGradGuard no_grad;
    (void)lin.forward(x);  // an evaluation pass: the weight's float16 cast is cached here
  }
  lin.forward(x).to(kFloat32).sum().backward();
  CHECK(lin.weight().grad().defined());
  CHECK(lin.bias().grad().defined());
}

TEST_CASE("nested float16 and bfloat16 regions each cast a parameter to their own dtype") {
  nn::Linear lin(16, 16);
  const Tensor x = randn({4, 16});
  autograd::AutocastGuard outer(true, kFloat16);
  CHECK_EQ(lin.forward(x).dtype(), kFloat16);
  {
    autograd::AutocastGuard inner(true, kBFloat16);
    CHECK_EQ(lin.forward(x).dtype(), kBFloat16);
  }
  CHECK_EQ(lin.forward(x).dtype(), kFloat16);
  CHECK_EQ(autograd::autocast_cache_size(), 4);  // weight and bias, in each dtype
}

TEST_CASE("autocast runs matmul-family ops in float16 or bfloat16 and sensitive ops in float32") {
  const Tensor a = randn({4, 8}), b = randn({8, 3});
  for (DType low : {kFloat16, kBFloat16}) {
    CAPTURE(dtype_name(low));
    autograd::AutocastGuard autocast(true, low);
    CHECK_EQ(mm(a, b).dtype(), low);
    CHECK_EQ(matmul(a, b).dtype(), low);
    CHECK_EQ(linear(a, b.t()).dtype(), low);
    const Tensor h = mm(a, b);
    CHECK_EQ(softmax(h, 1).dtype(), kFloat32);
    CHECK_EQ(log_softmax(h, 1).dtype(), kFloat32);
    CHECK_EQ(exp(h).dtype(), kFloat32);
    CHECK_EQ(h.sum().dtype(), kFloat32);
    CHECK_EQ(nn::cross_entropy(h, tensor({0, 1, 2, 0})).dtype(), kFloat32);
    CHECK_EQ(relu(h).dtype(), low);                      // not listed: runs in its input's dtype
    CHECK_EQ((h + a.slice(1, 0, 3)).dtype(), kFloat32);  // mixed inputs promote to the widest
    CHECK_EQ(cat({h, a.slice(1, 0, 3)}, 0).dtype(), kFloat32);  // promote ops
    {
      autograd::AutocastGuard off(false);
      CHECK_EQ(mm(a, b).dtype(), kFloat32);  // a disabled region inside an enabled one
    }
    CHECK_EQ(mm(a, b).dtype(), low);
  }
  // Only the 16-bit floats are lower precision.
  for (DType other : {kFloat32, kFloat64, kInt64, kBool}) {
    CHECK_THROWS_AS(autograd::AutocastGuard(true, other), DTypeError);
  }
  CHECK_NOTHROW(autograd::AutocastGuard(false, kFloat32));  // disabled: the dtype is unused
}

TEST_CASE("autocast casts a parameter once per region and frees the copy on exit") {
  nn::Linear lin(256, 256);
  const Tensor x = randn({2, 256});
  PolicyAllocator& alloc = allocator_for(kCPU);
  const int64_t before = static_cast<int64_t>(alloc.memory_allocated());
  {
    autograd::AutocastGuard autocast;
    Tensor y1 = lin.forward(x);
    Tensor y2 = lin.forward(x);
    CHECK_EQ(autograd::autocast_cache_size(), 2);  // weight and bias, once each
    y1 = Tensor();
    y2 = Tensor();
    // The cached float16 weight (256 x 256 x 2 bytes) and bias (512 bytes) are still held.
    CHECK_EQ(static_cast<int64_t>(alloc.memory_allocated()) - before, 256 * 256 * 2 + 512);
  }
  CHECK_EQ(autograd::autocast_cache_size(), 0);
  CHECK_EQ(static_cast<int64_t>(alloc.memory_allocated()) - before, 0);
}

TEST_CASE("autocast halves the bytes of the activations a linear layer saves") {
  nn::Linear lin(64, 64), lin2(64, 64);
  const Tensor x = randn({32, 64});
  PolicyAllocator& alloc = allocator_for(kCPU);
  auto kept = [&](bool amp, DType low = kFloat16) {
    const int64_t before = static_cast<int64_t>(alloc.memory_allocated());
    Tensor y;
    {
      autograd::AutocastGuard autocast(amp, low);
      y = lin2.forward(relu(lin.forward(x)));
    }
    return static_cast<int64_t>(alloc.memory_allocated()) - before;
  };
  // float32: the hidden activation (saved by relu and lin2) and the output, 8 KiB each.
  CHECK_EQ(kept(false), 2 * 32 * 64 * 4);
  // float16: the same two at 4 KiB each, plus what autocast adds: lin saves its float16 copy
  // of x (4 KiB), and lin2 saves its float16 weight (64 x 64 x 2 bytes) for the gradient of
  // its input, so that cast outlives the region's cache (as in PyTorch).
  CHECK_EQ(kept(true), 3 * 32 * 64 * 2 + 64 * 64 * 2);
  // bfloat16 takes the same 2 bytes per element.
  CHECK_EQ(kept(true, kBFloat16), 3 * 32 * 64 * 2 + 64 * 64 * 2);
}

TEST_CASE("GradScaler grows the scale after growth_interval clean steps") {
  Tensor w = ones({2}, TensorOptions().with_requires_grad());
  optim::SGD opt({w}, {.lr = 0.1});
  autograd::GradScaler scaler({.init_scale = 8.0, .growth_interval = 2});
  for (int step = 0; step < 2; ++step) {
    scaler.scale((w * 3.0).sum()).backward();
    CHECK(scaler.step(opt));
    scaler.update();
    opt.zero_grad();
  }
  CHECK_EQ(scaler.get_scale(), 16.0);
  CHECK_EQ(scaler.growth_tracker(), 0);
  // The unscaled gradient (3) was used: w = 1 - 2 * 0.1 * 3.
  check_values(w, {2}, {0.4, 0.4}, 1e-6);
}

TEST_CASE("GradScaler skips the step on an infinite gradient and backs off") {
  Tensor w = ones({2}, TensorOptions().with_requires_grad());
  optim::SGD opt({w}, {.lr = 0.1});
  autograd::GradScaler scaler({.init_scale = 1024.0});
  scaler.scale((w * tensor({INFINITY, 1.0})).sum()).backward();
  CHECK_FALSE(scaler.step(opt));
  CHECK(scaler.found_inf());
  scaler.update();
  CHECK_EQ(scaler.get_scale(), 512.0);
  check_values(w, {2}, {1, 1});  // untouched
  CHECK_THROWS_AS(autograd::GradScaler({.growth_factor = 0.5}), ValueError);
}

TEST_CASE("GradScaler checks each element: two finite gradients whose sum overflows are stepped") {
  // As PyTorch: 2e38 + 2e38 is inf in float32, but no element is, so the step is taken.
  Tensor w = zeros({2}, TensorOptions().with_requires_grad());
  optim::SGD opt({w}, {.lr = 1e-40});
  autograd::GradScaler scaler({.init_scale = 1.0});
  scaler.scale((w * tensor({2e38, 2e38})).sum()).backward();
  CHECK(scaler.step(opt));
  CHECK_FALSE(scaler.found_inf());
  // A NaN anywhere is found, wherever it sits.
  opt.zero_grad();
  scaler.update();
  scaler.scale((w * tensor({1.0, NAN})).sum()).backward();
  CHECK_FALSE(scaler.step(opt));
}

TEST_CASE("GradScaler keeps a scale that would grow past float32's range") {
  // PyTorch's scale is a float32: from 2^127 a growth would be inf, so it stays at 2^127.
  Tensor w = ones({1}, TensorOptions().with_requires_grad());
  optim::SGD opt({w}, {.lr = 0.0});
  autograd::GradScaler scaler({.init_scale = std::ldexp(1.0, 127), .growth_interval = 1});
  for (int step = 0; step < 4; ++step) {
    scaler.scale(w.sum() * 1e-30).backward();
    CHECK(scaler.step(opt));
    scaler.update();
    opt.zero_grad();
    CHECK_EQ(scaler.get_scale(), std::ldexp(1.0, 127));
  }
}

TEST_CASE("GradScaler rejects unscale_ twice and a second step before update") {
  Tensor w = ones({1}, TensorOptions().with_requires_grad());
  optim::SGD opt({w}, {.lr = 0.1});
  autograd::GradScaler scaler;
  scaler.scale(w.sum()).backward();
  scaler.unscale_(opt);
  CHECK_THROWS_WITH_AS(scaler.unscale_(opt),
                       doctest::Contains("unscale_() has already been called"), AutogradError);
  scaler.step(opt);
  CHECK_THROWS_WITH_AS(scaler.step(opt), doctest::Contains("step() has already been called"),
                       AutogradError);
  scaler.update();
  CHECK_EQ(scaler.state_dict().at("scale"), 65536.0);
}

}  // TEST_SUITE("autograd")
