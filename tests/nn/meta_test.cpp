// meta:N: tensors with shapes and no values. What a program allocates on meta:N must equal, byte
// for byte, what it allocates on sim:N or the bounded cpu of the same capacity (the same
// allocator policy over the same kind of source), with no kernel run and no page touched; reading
// a value is an error naming the op.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/autocast.h"
#include "autograd/autograd.h"
#include "autograd/checkpoint.h"
#include "engine/memgrad.h"
#include "engine/nn/functional.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"
#include "tests/support/error_check.h"

using namespace memgrad;

namespace {

constexpr int kIndex = 5;  // devices of their own: other cases use sim:0 and sim:1
constexpr size_t kCapacity = size_t{256} << 20;

// meta:kIndex or sim:kIndex with a fresh allocator of `config` over `capacity` bytes.
Device fresh(DeviceType type, const AllocatorConfig& config, size_t capacity = kCapacity) {
  const Device device(type, kIndex);
  set_allocator_config(device, config);
  if (type == DeviceType::Meta) {
    set_meta_capacity(kIndex, capacity);
  } else {
    set_sim_capacity(kIndex, capacity);
  }
  return device;
}

// Every statistic and every segment with its blocks, as one comparable text per line.
std::vector<std::string> memory_state(Device device) {
  std::vector<std::string> lines;
  for (const auto& [name, value] : memory_stats(device).to_flat_map()) {
    lines.push_back(fmt::format("{} = {}", name, value));
  }
  for (const SegmentSnapshot& s : allocator_for(device).snapshot()) {
    lines.push_back(fmt::format("segment {:#x} {} small={} expandable={}", s.address, s.nbytes,
                                s.small_pool, s.expandable));
    for (const BlockSnapshot& b : s.blocks) {
      lines.push_back(fmt::format("  block {:#x} {} requested {} allocated={}", b.address, b.nbytes,
                                  b.requested, b.allocated));
    }
  }
  return lines;
}

// How a training step runs its forward.
enum class Forward { Plain, Checkpointed, Autocast };

// Three AdamW steps of a 64-128-128-10 MLP on a batch of 32 on `device`, the forward plain,
// under checkpoint() or under float16 autocast. Returns the memory state after each phase of
// each step.
std::vector<std::vector<std::string>> train(Device device, Forward forward) {
  auto model =
      std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
          std::make_shared<nn::Linear>(64, 128), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(128, 128), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(128, 10)});
  model->to(device);
  optim::AdamW optimizer(model->parameters(), optim::AdamOptions{});
  const Tensor x = randn({32, 64}, device);
  const Tensor target = randint(0, 10, {32}, TensorOptions(kInt64).with_device(device));
  std::vector<std::vector<std::string>> phases;
  for (int step = 0; step < 3; ++step) {
    Tensor logits;
    if (forward == Forward::Checkpointed) {
      logits = autograd::checkpoint([&](const Tensor& h) { return (*model)(h); }, x);
    } else {
      autograd::AutocastGuard autocast(forward == Forward::Autocast);
      logits = (*model)(x);
    }
    Tensor loss = nn::cross_entropy(logits, target);
    phases.push_back(memory_state(device));
    loss.backward();
    phases.push_back(memory_state(device));
    optimizer.step();
    optimizer.zero_grad();
    phases.push_back(memory_state(device));
  }
  return phases;
}

AllocatorConfig policy(const char* name) {
  AllocatorConfig config;
  config.policy = name;
  return config;
}

}  // namespace

TEST_CASE("meta devices parse, print and name their range") {
  CHECK_EQ(Device("meta"), Device(DeviceType::Meta, 0));
  CHECK_EQ(Device("meta:7").str(), "meta:7");
  CHECK(Device("meta:1").is_meta());
  CHECK_FALSE(Device("meta:1").is_host());
  const auto caught = memgrad::testing::caught<DeviceError>([] { (void)Device("meta:64"); });
  REQUIRE(caught);
  CHECK_EQ(caught->devices(), std::vector<std::string>{"meta:64"});
}

TEST_CASE("a meta tensor takes the bytes a sim tensor takes, and has no values") {
  for (const char* name : {"caching", "expandable", "passthrough"}) {
    CAPTURE(name);
    const Device meta = fresh(DeviceType::Meta, policy(name));
    const Device sim = fresh(DeviceType::Sim, policy(name));
    for (Device d : {meta, sim}) {
      const Tensor a = randn({1000, 300}, d);
      const Tensor b = a.t().contiguous();
      const Tensor c = ones({7}, TensorOptions(kFloat64).with_device(d));
      (void)(b.sum() + c.sum());
    }
    CHECK_EQ(memory_state(meta), memory_state(sim));
  }
  const Device meta(DeviceType::Meta, kIndex);
  const Tensor t = zeros({2, 3}, meta);
  CHECK_EQ(t.str(), "tensor(..., device='meta:5', size=(2, 3))");
  const auto item = memgrad::testing::caught<DeviceError>([&] { (void)t.sum().item<float>(); });
  REQUIRE(item);
  CHECK_EQ(item->op(), "item");
  CHECK(std::string(item->what()).find("meta:5") != std::string::npos);
  // item_or: the assumed number on meta, the value elsewhere.
  CHECK_EQ(t.sum().item_or(-1.0), -1.0);
  CHECK_EQ(ones({2, 3}).sum().item_or(-1.0), 6.0);
  const auto to_cpu = memgrad::testing::caught<DeviceError>([&] { (void)t.cpu(); });
  REQUIRE(to_cpu);
  CHECK_EQ(to_cpu->op(), "to");
  CHECK_EQ(to_cpu->devices(), (std::vector<std::string>{"meta:5", "cpu"}));
}

TEST_CASE("a training step on meta:N allocates exactly what it allocates on sim:N") {
  // Forward, backward and the optimizer step, phase by phase, under four policies (the planned
  // one records two steps and serves the third from its plan), plain, checkpointed and under
  // autocast: every statistic, every segment and every block at the same address.
  for (const char* name : {"caching", "expandable", "passthrough", "planned"}) {
    for (Forward forward : {Forward::Plain, Forward::Checkpointed, Forward::Autocast}) {
      CAPTURE(name);
      CAPTURE(static_cast<int>(forward));
      const auto on_meta = train(fresh(DeviceType::Meta, policy(name)), forward);
      const auto on_sim = train(fresh(DeviceType::Sim, policy(name)), forward);
      REQUIRE_EQ(on_meta.size(), on_sim.size());
      // Something to compare: the forward's blocks are there, in segments.
      const std::vector<std::string>& after_forward = on_meta.front();
      CHECK(std::count_if(after_forward.begin(), after_forward.end(), [](const std::string& line) {
              return line.starts_with("  block") && line.ends_with("allocated=true");
            }) > 5);
      for (size_t i = 0; i < on_meta.size(); ++i) {
        CAPTURE(i);
        CHECK_EQ(on_meta[i], on_sim[i]);
      }
    }
  }
}

TEST_CASE("estimate_memory: a program's peaks on a meta device, and whether it fits") {
  // The same program (three AdamW steps of an MLP) on sim:N and estimated: the same peaks.
  auto step = [](Device device) { (void)train(device, Forward::Plain); };
  const Device sim = fresh(DeviceType::Sim, policy("expandable"));
  step(sim);
  const MemoryEstimate e = estimate_memory(step, size_t{1} << 30, policy("expandable"), kIndex);
  CHECK(e.fits);
  CHECK_EQ(e.capacity, size_t{1} << 30);
  CHECK_EQ(e.peak_allocated, max_memory_allocated(sim));
  CHECK_EQ(e.peak_reserved, max_memory_reserved(sim));
  CHECK_EQ(e.allocated_after, 0);  // the program's tensors are gone when it returns
  CHECK_EQ(memory_reserved(Device(DeviceType::Meta, kIndex)), 0);  // and the device is fresh
  // On a device too small: the OutOfMemoryError is the answer, not an exception.
  const MemoryEstimate small = estimate_memory(step, size_t{1} << 20, {}, kIndex);
  CHECK_FALSE(small.fits);
  CHECK(small.out_of_memory.find("meta:5 out of memory") != std::string::npos);
  CHECK_LE(small.peak_reserved, size_t{1} << 20);
  // A value read on the meta device is the program's error: thrown, naming the op.
  const auto read = memgrad::testing::caught<DeviceError>([] {
    (void)estimate_memory(
        [](Device d) { (void)ones({3}, TensorOptions().with_device(d)).sum().item<float>(); },
        size_t{64} << 20);
  });
  REQUIRE(read);
  CHECK_EQ(read->op(), "item");
}

TEST_CASE("a training step on meta:N allocates exactly what it allocates on the cpu") {
  // The cpu bounded to the same capacity (what --memory-limit makes it): the host's memory, the
  // same policy and source kind, so the same statistics, segments and blocks.
  for (const char* name : {"caching", "expandable"}) {
    CAPTURE(name);
    set_allocator_config(kCPU, policy(name));
    set_cpu_memory_limit(kCapacity);
    const auto on_cpu = train(kCPU, Forward::Checkpointed);
    set_cpu_memory_limit(0);  // back to the host's memory, with the default policy
    set_allocator_config(kCPU, AllocatorConfig{});
    CHECK_EQ(train(fresh(DeviceType::Meta, policy(name)), Forward::Checkpointed), on_cpu);
  }
}

TEST_CASE("a meta device holds more than this machine has, and runs out where its capacity ends") {
  // 48 GiB allocated on an 80 GiB meta device: addresses only, no page touched.
  const Device meta = fresh(DeviceType::Meta, policy("caching"), size_t{80} << 30);
  {
    const Tensor big = empty({int64_t{12} << 30}, meta);  // 12 Gi floats
    CHECK_EQ(memory_allocated(meta), size_t{48} << 30);
    const auto oom = memgrad::testing::caught<OutOfMemoryError>(
        [&] { (void)empty({int64_t{9} << 30}, meta); });  // 36 GiB more: 84 > 80
    REQUIRE(oom);
    CHECK_EQ(oom->info().requested, size_t{36} << 30);
    CHECK_EQ(memory_stats(meta).num_ooms, 1);
  }
  CHECK_EQ(memory_allocated(meta), 0u);
}
