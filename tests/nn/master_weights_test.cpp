// Optimizers against PyTorch's, and master weights: SGD, Adam and AdamW over 50 steps agree with
// torch.optim to 2 units in the last place, float64 Adam over 220 steps to 1e-12 (tests/nn/
// torch_optim_reference.py runs PyTorch on the same gradients); master-weights runs keep float32
// copies that agree the same way with PyTorch stepping a float32 copy, and their bytes are
// exactly 2 + 2 + 12 per parameter element with Adam (rounded per tensor as the allocator
// rounds), plus one float32 gradient temporary during the step. GradScaler with master weights:
// float16 gradients stay scaled, the optimizer unscales them in float32, skips and the
// collective decision of combine_found_inf.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::testing::check_values;
using memgrad::testing::rounded;

namespace {

constexpr int64_t kN = 7;

// The gradient of step k, as torch_optim_reference.py computes it (float64, then dtype).
Tensor gradient(int k, DType dtype) {
  std::vector<double> g;
  for (int j = 0; j < kN; ++j) g.push_back(std::sin(0.37 * k + 1.3 * j) * (1 + 0.1 * j));
  return from_vector(g, {kN}).to(dtype);
}

Tensor start(DType dtype) {
  std::vector<double> p;
  for (int j = 0; j < kN; ++j) p.push_back(0.5 - 0.13 * j);
  Tensor t = from_vector(p, {kN}).to(dtype);
  t.requires_grad_();
  return t;
}

// PyTorch's lines for `config`: each "value [master]" in float.hex; empty when no Python here
// imports torch (./memgrad test installs Debian's python3-torch, so the suite always has one).
std::vector<std::vector<double>> torch_reference(const std::string& config) {
  const std::string script =
      std::string(MEMGRAD_SOURCE_ROOT) + "/tests/nn/torch_optim_reference.py";
  const std::string command = "/usr/bin/python3 " + script + " " + config + " 2>&1";
  std::vector<std::vector<double>> rows;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char line[256];
  std::string all;
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    all += line;
    std::vector<double> row;
    char* p = line;
    char* end = nullptr;
    for (double v = std::strtod(p, &end); end != p; v = std::strtod(p, &end)) {
      row.push_back(v);
      p = end;
    }
    rows.push_back(row);
  }
  const int status = pclose(pipe);
  INFO(all);
  REQUIRE_EQ(status, 0);
  REQUIRE_EQ(rows.size(), static_cast<size_t>(kN));
  return rows;
}

// |got - expected| within `ulps` units in the last place of `dtype` at expected.
void check_ulps(double got, double expected, DType dtype, double ulps) {
  const int digits = dtype == kFloat64 ? 53 : dtype == kFloat32 ? 24 : dtype == kFloat16 ? 11 : 8;
  const double ulp = std::ldexp(1.0, std::ilogb(expected) - digits + 1);
  CAPTURE(got);
  CAPTURE(expected);
  CHECK(std::abs(got - expected) <= ulps * ulp);
}

struct Run {
  std::string config;
  DType dtype;
  int steps;
  std::function<std::unique_ptr<optim::Optimizer>(Tensor)> make;
  bool master = false;
};

}  // namespace

TEST_SUITE("nn") {
TEST_CASE("SGD, Adam, AdamW and master weights agree with torch.optim step after step") {
  const std::vector<Run> runs = {
      {"sgd", kFloat32, 50,
       [](Tensor p) {
         return std::make_unique<optim::SGD>(
             std::vector<Tensor>{p},
             optim::SGDOptions{
                 .lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
       }},
      {"nesterov", kFloat32, 50,
       [](Tensor p) {
         return std::make_unique<optim::SGD>(
             std::vector<Tensor>{p},
             optim::SGDOptions{
                 .lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true});
       }},
      {"adam", kFloat32, 50,
       [](Tensor p) {
         return std::make_unique<optim::Adam>(std::vector<Tensor>{p},
                                              optim::AdamOptions{.lr = 0.01, .weight_decay = 0.01});
       }},
      {"adamw", kFloat32, 50,  // PyTorch's default weight decay, 0.01
       [](Tensor p) {
         return std::make_unique<optim::AdamW>(std::vector<Tensor>{p},
                                               optim::AdamOptions{.lr = 0.01});
       }},
      {"adam64", kFloat64, 220,
       [](Tensor p) {
         return std::make_unique<optim::Adam>(
             std::vector<Tensor>{p}, optim::AdamOptions{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99});
       }},
      {"master-bf16-adamw", kBFloat16, 50,
       [](Tensor p) {
         return std::make_unique<optim::AdamW>(
             std::vector<Tensor>{p}, optim::AdamOptions{.lr = 0.01, .master_weights = true});
       },
       true},
      {"master-fp16-sgd", kFloat16, 50,
       [](Tensor p) {
         return std::make_unique<optim::SGD>(
             std::vector<Tensor>{p},
             optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .master_weights = true});
       },
       true},
  };
  for (const Run& run : runs) {
    CAPTURE(run.config);
    const std::vector<std::vector<double>> expected = torch_reference(run.config);
    Tensor p = start(run.dtype);
    std::unique_ptr<optim::Optimizer> opt = run.make(p);
    CHECK_EQ(opt->has_master(0), run.master);
    for (int k = 1; k <= run.steps; ++k) {
      p.set_grad(gradient(k, run.dtype));
      opt->step();
    }
    const std::vector<double> got = p.to_vector<double>();
    for (size_t j = 0; j < got.size(); ++j) {
      CAPTURE(j);
      if (run.dtype == kFloat64) {
        // 220 steps in float64: within 1e-12, relative (a few float64 ulps in practice).
        CHECK(std::abs(got[j] - expected[j][0]) <= 1e-12 * std::abs(expected[j][0]));
        continue;
      }
      if (!run.master) {
        check_ulps(got[j], expected[j][0], run.dtype, 2);
        continue;
      }
      REQUIRE_EQ(expected[j].size(), 2);
      check_ulps(opt->master(0).to_vector<double>()[j], expected[j][1], kFloat32, 2);
      // The parameter is its master copy rounded: equal to PyTorch's wherever the copies agree
      // to the bit, one 16-bit ulp apart at most where rounding meets a 1-ulp difference.
      check_ulps(got[j], expected[j][0], run.dtype, 1);
    }
  }
}

TEST_CASE("master weights: 2 + 2 + 12 bytes per element with Adam, one float32 temporary") {
  PolicyAllocator& alloc = allocator_for(kCPU);
  for (DType low : {kBFloat16, kFloat16}) {
    CAPTURE(dtype_name(low));
    const int64_t before = static_cast<int64_t>(alloc.memory_allocated());
    nn::Linear lin(256, 128);
    lin.to(low);
    const std::vector<Tensor> params = lin.parameters();
    const int64_t w = 256 * 128, b = 128;
    CHECK_EQ(static_cast<int64_t>(alloc.memory_allocated()) - before,
             rounded(2 * w) + rounded(2 * b));
    optim::AdamW opt(params, {.lr = 1e-3, .master_weights = true});
    // At construction: the float32 copies (exact: float32 holds every 16-bit value).
    CHECK_EQ(static_cast<int64_t>(opt.master_nbytes()), rounded(4 * w) + rounded(4 * b));
    CHECK_EQ(opt.state_nbytes(), opt.master_nbytes());
    CHECK(equal(opt.master(0), params[0].to(kFloat32)));
    CHECK_EQ(opt.master(0).dtype(), kFloat32);
    const Tensor x = randn({16, 256}).to(low);
    lin.forward(x).to(kFloat32).square().mean().backward();
    const int64_t held = static_cast<int64_t>(alloc.memory_allocated());
    CHECK_EQ(held - before, 2 * (rounded(2 * w) + rounded(2 * b)) + rounded(4 * w) +
                                rounded(4 * b) + 0 /* x, freed below */ + rounded(2 * 16 * 256));
    alloc.reset_peak_stats();
    opt.step();
    // Adam's moments in float32, lazily; the gradient conversions come and go one at a time:
    // the peak above what is held after the step is the largest one, the weight's.
    const int64_t state = 2 * (rounded(4 * w) + rounded(4 * b));
    CHECK_EQ(static_cast<int64_t>(opt.state_nbytes()),
             static_cast<int64_t>(opt.master_nbytes()) + state);
    const int64_t after = static_cast<int64_t>(alloc.memory_allocated());
    CHECK_EQ(after - held, state);
    // (the weight is stepped first: the bias's moments come after its temporary is freed).
    CHECK_EQ(alloc.stats().allocated_bytes.all().peak - after, rounded(4 * w) - 2 * rounded(4 * b));
    // The parameter is the master copy rounded, and stays in its dtype.
    CHECK_EQ(params[0].dtype(), low);
    CHECK(equal(params[0], opt.master(0).to(low)));
    // Per element of the weight: 2 (parameter) + 2 (gradient) + 4 (master) + 8 (moments).
    CHECK_EQ(params[0].nbytes() + params[0].grad().nbytes() + opt.master(0).nbytes() * 3,
             static_cast<size_t>(16 * w));
  }
}

TEST_CASE("master weights: float32 parameters are stepped as usual; state dicts keep the copy") {
  Tensor p32 = start(kFloat32), p16 = start(kBFloat16);
  optim::Adam opt({p32, p16}, {.lr = 0.01, .master_weights = true});
  CHECK_FALSE(opt.has_master(0));
  CHECK(opt.has_master(1));
  for (int k = 1; k <= 3; ++k) {
    p32.set_grad(gradient(k, kFloat32));
    p16.set_grad(gradient(k, kBFloat16));
    opt.step();
  }
  const optim::OptimizerState saved = opt.state_dict();
  bool has_master = false;
  for (const auto& [name, t] : saved.tensors) has_master |= name == "state.1.master_param";
  CHECK(has_master);
  // A fresh optimizer over fresh parameters takes the copy and the moments back exactly.
  Tensor q32 = start(kFloat32), q16 = start(kBFloat16);
  optim::Adam resumed({q32, q16}, {.lr = 0.01, .master_weights = true});
  resumed.load_state_dict(saved);
  CHECK(equal(resumed.master(1), opt.master(1)));
  // A state saved without master weights (a float32 run's, or an earlier memgrad's): the copy
  // follows the parameter as loaded, not the weights the optimizer was built over.
  Tensor r16 = start(kBFloat16);
  optim::Adam from_plain({r16}, {.lr = 0.01, .master_weights = true});
  {
    NoGradGuard no_grad;
    r16.fill_(0.25);
  }
  optim::OptimizerState without;
  without.scalars["lr"] = 0.01;
  from_plain.load_state_dict(without);
  CHECK(equal(from_plain.master(0), full({kN}, 0.25)));
  // An optimizer without master weights refuses a state that has them.
  optim::Adam plain({q32, q16}, {.lr = 0.01});
  CHECK_THROWS_AS(plain.load_state_dict(saved), CheckpointError);
  CHECK_FALSE(plain.has_master(1));
}

TEST_CASE("GradScaler with master weights: float16 gradients stay scaled, float32 unscales") {
  Tensor w = ones({2}, TensorOptions(kFloat16).with_requires_grad());
  optim::SGD opt({w}, {.lr = 0.1, .master_weights = true});
  autograd::GradScaler scaler({.init_scale = 1024.0});
  scaler.scale((w * 3.0).sum()).backward();
  CHECK(scaler.step(opt));
  // The float16 gradient still holds 3 x 1024 (unscaling it in float16 is what the scale is
  // there to avoid); the step used 3: master = 1 - 0.1 x 3.
  check_values(w.grad(), {2}, {3072, 3072}, 0.0);
  check_values(opt.master(0), {2}, {0.7, 0.7}, 1e-7);
  check_values(w, {2}, {0.7, 0.7}, 1e-3);
  scaler.update();
  opt.zero_grad();
  // 3 x 65536 overflows float16: inf in the scaled gradient, the step is skipped and the scale
  // backs off; the next step is not unscaled twice.
  scaler.update(65536.0);
  scaler.scale((w * 3.0).sum()).backward();
  CHECK_FALSE(scaler.step(opt));
  check_values(opt.master(0), {2}, {0.7, 0.7}, 1e-7);
  scaler.update();
  CHECK_EQ(scaler.get_scale(), 32768.0);
  opt.zero_grad();
  scaler.scale((w * 1.0).sum()).backward();
  CHECK(scaler.step(opt));
  check_values(opt.master(0), {2}, {0.6, 0.6}, 1e-6);
}

TEST_CASE("GradScaler's combine_found_inf decides for every rank") {
  Tensor w = ones({2}, TensorOptions().with_requires_grad());
  optim::SGD opt({w}, {.lr = 0.1});
  bool asked = false, local = true;
  autograd::GradScaler scaler({.init_scale = 8.0, .combine_found_inf = [&](bool found) {
                                 asked = true;
                                 local = found;
                                 return true;  // another rank found one
                               }});
  scaler.scale((w * 3.0).sum()).backward();
  CHECK_FALSE(scaler.step(opt));
  CHECK(asked);
  CHECK_FALSE(local);  // this rank's gradients were finite
  check_values(w, {2}, {1, 1}, 0.0);
  scaler.update();
  CHECK_EQ(scaler.get_scale(), 4.0);
}
}  // TEST_SUITE("nn")
