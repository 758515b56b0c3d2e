// compare_memgrad: the memgrad half of the GPU comparison with PyTorch (run_comparison.sh runs
// it next to compare_pytorch.py and prints both side by side). The same small programs, phase by
// phase, printing memory_allocated / memory_reserved / max_memory_allocated after each phase as
// JSON on stdout:
//   B1   allocated vs reserved: a 64 MiB tensor allocated, freed, allocated again
//   B2   empty_cache returns the cached segment
//   B8   a deep MLP's saved activations, freed by backward
//   B9   the same forward under no_grad saves nothing
//   B13  checkpoint_sequential keeps only segment inputs
//   B14  float16 autocast: half-size activations
//   MLP  one training step of 784-512-512-10, batch 128, SGD with momentum
//   STEP one AdamW step of a GPT-style transformer (examples/charlm: 12 blocks of width 768,
//        12 heads, context 1024, 86 characters, batch 8; --step-* flags), and "STEP estimate":
//        the same step on meta:0, the estimate of the STEP rows (docs/estimate.md)
// and timings: float16 GEMM TFLOP/s at 4096^3 and 8192^3, the MLP step time, and the host time
// of one op on 1-element tensors (c = a + b, and c = g * b + b recorded for backward).
//
//   ./build-cuda/examples/gpu/compare_memgrad --device cuda:0 > memgrad.json
//   ./build/examples/gpu/compare_memgrad --device cpu --skip-timings --deep-width 256
//       (a smoke run anywhere; compare_pytorch.py takes the same flags)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "autograd/autograd.h"
#include "bench/bench_util.h"
#include "engine/nn/functional.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"
#include "examples/charlm/charlm_model.h"

#if __has_include("autograd/checkpoint.h")
#include "autograd/checkpoint.h"
#define MEMGRAD_HAVE_CHECKPOINT 1
#else
#define MEMGRAD_HAVE_CHECKPOINT 0
#endif
#if __has_include("autograd/autocast.h")
#include "autograd/autocast.h"
#define MEMGRAD_HAVE_AUTOCAST 1
#else
#define MEMGRAD_HAVE_AUTOCAST 0
#endif

using namespace memgrad;

namespace {

// The transformer step: CharLM's shape and batch (--step-width, --step-layers, --step-batch).
examples::CharLMShape g_step_shape{86, 768, 12, 12, 1024};
int64_t g_step_batch = 8;

// The deep MLP of B8/B9/B13/B14: layers of width x width, a batch of `batch` rows.
constexpr int64_t kDeepLayers = 8;
int64_t g_deep_width = 2048, g_deep_batch = 512;

// The JSON document built phase by phase.
class Recorder {
 public:
  explicit Recorder(Device device) : device_(device) {}
  // The device the next phases read.
  void use_device(Device device) { device_ = device; }

  // Frees what the caller dropped, returns the cache and resets the peak: a clean start.
  void begin(const std::string& behaviour) {
    synchronize();
    empty_cache(device_);
    reset_peak_memory_stats(device_);
    behaviour_ = behaviour;
  }
  void phase(const std::string& name) {
    synchronize();
    phases_.push_back(
        fmt::format(R"({{"behaviour": "{}", "phase": "{}", "allocated": {}, "reserved": {}, )"
                    R"("max_allocated": {}}})",
                    behaviour_, name, memory_allocated(device_), memory_reserved(device_),
                    max_memory_allocated(device_)));
  }
  void timing(const std::string& name, double value) {
    timings_.push_back(fmt::format(R"("{}": {:.4f})", name, value));
  }
  void note(const std::string& text) { notes_.push_back(fmt::format(R"("{}")", text)); }
  void synchronize() const {
    if (device_.is_cuda()) cuda::synchronize(device_.index());
  }
  void print(const std::string& device_name) const {
    fmt::print(
        "{{\n  \"framework\": \"memgrad\",\n  \"device\": \"{}\",\n  \"phases\": [\n    {}\n  ],\n"
        "  \"timings\": {{{}}},\n  \"notes\": [{}]\n}}\n",
        device_name, fmt::join(phases_, ",\n    "), fmt::join(timings_, ", "),
        fmt::join(notes_, ", "));
  }

 private:
  Device device_;
  std::string behaviour_;
  std::vector<std::string> phases_, timings_, notes_;
};

// Linear + ReLU layers as a chain of modules (for checkpoint_sequential).
std::vector<std::shared_ptr<nn::UnaryModule>> deep_mlp(Device device) {
  std::vector<std::shared_ptr<nn::UnaryModule>> layers;
  for (int64_t i = 0; i < kDeepLayers; ++i) {
    layers.push_back(std::make_shared<nn::Linear>(g_deep_width, g_deep_width,
                                                  nn::LinearOptions{true, device, kFloat32}));
    layers.push_back(std::make_shared<nn::ReLU>());
  }
  return layers;
}

Tensor run_chain(const std::vector<std::shared_ptr<nn::UnaryModule>>& layers, Tensor x) {
  for (const auto& layer : layers) x = layer->forward(x);
  return x;
}

void mark_trainable(const std::vector<std::shared_ptr<nn::UnaryModule>>& layers) {
  for (const auto& layer : layers) {
    for (Tensor p : layer->parameters()) p.requires_grad_(true);
  }
}

void b1_b2(Recorder& r, Device device) {
  r.begin("B1");
  r.phase("start");
  Tensor x = empty({16 * 1024 * 1024}, device);  // 64 MiB
  r.phase("after alloc 64MiB");
  x = Tensor();
  r.phase("after free");
  x = empty({16 * 1024 * 1024}, device);
  r.phase("after realloc 64MiB");
  x = Tensor();
  r.begin("B2");
  x = empty({16 * 1024 * 1024}, device);
  x = Tensor();
  r.phase("freed, before empty_cache");
  empty_cache(device);
  r.phase("after empty_cache");
}

void b8_b9(Recorder& r, Device device) {
  r.begin("B8");
  auto layers = deep_mlp(device);
  mark_trainable(layers);
  const Tensor x = randn({g_deep_batch, g_deep_width}, device);
  r.phase("parameters and input");
  {
    Tensor loss = run_chain(layers, x).sum();
    r.phase("after forward (saved activations)");
    loss.backward();
    r.phase("after backward (activations freed, grads kept)");
  }
  r.begin("B9");
  {
    NoGradGuard no_grad;
    const Tensor y = run_chain(layers, x);
    r.phase("after forward under no_grad");
  }
  r.phase("after the output is dropped");
}

void b13(Recorder& r, Device device) {
  r.begin("B13");
#if MEMGRAD_HAVE_CHECKPOINT
  auto layers = deep_mlp(device);
  mark_trainable(layers);
  const Tensor x = randn({g_deep_batch, g_deep_width}, device);
  r.phase("parameters and input");
  Tensor loss = autograd::checkpoint_sequential(layers, 4, x).sum();
  r.phase("after checkpointed forward (4 segments)");
  loss.backward();
  r.phase("after backward");
#else
  (void)device;
  r.note("B13 skipped: autograd/checkpoint.h is not in this build");
#endif
}

void b14(Recorder& r, Device device) {
  r.begin("B14");
#if MEMGRAD_HAVE_AUTOCAST
  auto layers = deep_mlp(device);
  mark_trainable(layers);
  const Tensor x = randn({g_deep_batch, g_deep_width}, device);
  r.phase("parameters and input");
  Tensor loss;
  {
    autograd::AutocastGuard autocast(true, kFloat16);
    loss = run_chain(layers, x).sum();
    r.phase("after float16 autocast forward");
  }
  loss.backward();
  r.phase("after backward");
#else
  (void)device;
  r.note("B14 skipped: autograd/autocast.h is not in this build");
#endif
}

// The MLP of train_mlp: 784-512-512-10.
struct Mlp {
  explicit Mlp(Device device)
      : fc1(784, 512, {true, device, kFloat32}),
        fc2(512, 512, {true, device, kFloat32}),
        fc3(512, 10, {true, device, kFloat32}) {}
  Tensor forward(const Tensor& x) { return fc3.forward(relu(fc2.forward(relu(fc1.forward(x))))); }
  std::vector<Tensor> parameters() {
    std::vector<Tensor> p;
    for (nn::Linear* l : {&fc1, &fc2, &fc3}) {
      for (const Tensor& t : l->parameters()) p.push_back(t);
    }
    return p;
  }
  nn::Linear fc1, fc2, fc3;
};

// One training step's phases, then the median step time over `steps` steps.
void mlp_step(Recorder& r, Device device, int steps, bool timings) {
  r.begin("MLP");
  Mlp model(device);
  std::vector<Tensor> params = model.parameters();
  for (Tensor& p : params) p.requires_grad_(true);
  optim::SGD sgd(params, {.lr = 0.01, .momentum = 0.9});
  const Tensor x = randn({128, 784}, device);
  const Tensor y = randint(0, 10, {128}, TensorOptions(kInt64).with_device(device));
  r.phase("parameters and batch");
  auto step = [&](bool record) {
    Tensor loss = nn::cross_entropy(model.forward(x), y);
    if (record) r.phase("after forward");
    loss.backward();
    if (record) r.phase("after backward");
    sgd.step();
    if (record) r.phase("after optimizer step");
    sgd.zero_grad();
    if (record) r.phase("after zero_grad");
  };
  step(true);
  if (!timings) return;
  for (int i = 0; i < 10; ++i) step(false);
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i) {
    r.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    step(false);
    r.synchronize();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  r.timing("mlp_step_ms_median", bench::median(ms));
}

// One AdamW step of a CharLM, phase by phase, as `behaviour` on `device`. On a meta device the
// same step is the estimate: no kernel runs, the allocator serves the same requests.
void transformer_step(Recorder& r, Device device, const std::string& behaviour) {
  r.begin(behaviour);
  {
    examples::CharLM model(g_step_shape, 0.0, 0, device);
    optim::AdamW adamw(model.parameters(), optim::AdamOptions{.weight_decay = 0.01});
    const TensorOptions tokens = TensorOptions(kInt64).with_device(device);
    const Tensor x = randint(0, g_step_shape.vocab, {g_step_batch, g_step_shape.context}, tokens);
    const Tensor y = randint(0, g_step_shape.vocab, {g_step_batch, g_step_shape.context}, tokens);
    r.phase("parameters and batch");
    Tensor loss = examples::charlm_loss(model, x, y, false).loss;
    r.phase("after forward");
    loss.backward();
    loss = Tensor();
    r.phase("after backward");
    adamw.step();
    r.phase("after optimizer step");
    adamw.zero_grad();
    r.phase("after zero_grad");
  }
  r.phase("after the model is dropped (reserved: the cache)");
}

// Float16 GEMM throughput: the best of `reps` products after two warm-ups.
void gemm_tflops(Recorder& r, Device device, int64_t n) {
  const Tensor a = randn({n, n}, device).to(kFloat16), b = randn({n, n}, device).to(kFloat16);
  for (int i = 0; i < 2; ++i) (void)matmul(a, b);
  double best = 0.0;
  for (int i = 0; i < 10; ++i) {
    r.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    const Tensor c = matmul(a, b);
    r.synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * static_cast<double>(n) * n * n / s / 1e12);
  }
  r.timing(fmt::format("gemm_fp16_{}_tflops", n), best);
}

// The host time of one op on 1-element tensors of `device` (us per op): the median over 21
// loops of 1000, each loop ended by a synchronisation, after one untimed loop. c = a + b alone,
// and c = g * b + b with g requiring grad (two ops, recorded for backward: per op).
void one_element_overhead(Recorder& r, Device device) {
  const Tensor a = ones({1}, device), b = ones({1}, device);
  const Tensor g = ones({1}, TensorOptions().with_device(device).with_requires_grad());
  auto per_op_us = [&](const std::function<Tensor()>& ops, int ops_per_call) {
    constexpr int kCalls = 1000;
    std::vector<double> us;
    for (int loop = 0; loop <= 21; ++loop) {
      r.synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      Tensor c;
      for (int i = 0; i < kCalls; ++i) c = ops();
      r.synchronize();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (loop > 0) us.push_back(s / (kCalls * ops_per_call) * 1e6);
    }
    return bench::median(us);
  };
  r.timing("add_1elem_overhead_us", per_op_us([&] { return a + b; }, 1));
  r.timing("autograd_mul_add_1elem_overhead_us", per_op_us([&] { return g * b + b; }, 2));
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "cuda:0";
  bool skip_timings = false;
  int steps = 50;
  CLI::App app{"memgrad's side of the GPU memory comparison with PyTorch (JSON on stdout)."};
  app.add_option("--device", device_name, "cuda:N, or cpu / sim:N for a smoke run");
  app.add_flag("--skip-timings", skip_timings, "Only the memory phases");
  app.add_option("--steps", steps, "Timed MLP steps");
  app.add_option("--deep-width", g_deep_width, "Width of the deep MLP's layers (B8-B14)");
  app.add_option("--deep-batch", g_deep_batch, "Batch of the deep MLP (B8-B14)");
  app.add_option("--step-width", g_step_shape.width, "Width of the STEP transformer");
  app.add_option("--step-layers", g_step_shape.layers, "Blocks of the STEP transformer");
  app.add_option("--step-heads", g_step_shape.heads, "Heads of the STEP transformer");
  app.add_option("--step-context", g_step_shape.context, "Context of the STEP transformer");
  app.add_option("--step-batch", g_step_batch, "Batch of the STEP transformer");
  CLI11_PARSE(app, argc, argv);
  try {
    const Device device(device_name);
    manual_seed(0);
    Recorder r(device);
    b1_b2(r, device);
    b8_b9(r, device);
    b13(r, device);
    b14(r, device);
    mlp_step(r, device, std::max(steps, 1), !skip_timings);
    transformer_step(r, device, "STEP");
    const Device meta("meta:0");  // 80 GiB unless MEMGRAD_META_MEMORY says otherwise
    r.use_device(meta);
    transformer_step(r, meta, "STEP estimate");
    r.use_device(device);
    if (!skip_timings) {
      gemm_tflops(r, device, 4096);
      gemm_tflops(r, device, 8192);
      one_element_overhead(r, device);
    }
    if (device.is_cuda()) r.note(cuda::get_device_properties(device.index()).name);
    r.print(device.str());
  } catch (const Error& e) {
    std::fprintf(stderr, "compare_memgrad: %s\n", e.what());
    return 1;
  }
  return 0;
}
