// The nccl backend on one GPU: a process group of world size 1 on cuda:0 (NCCL's communicator of
// one rank, no store), its collectives with PyTorch's results, each run through NCCL (call check
// included) even for one rank, the argument checks, and DistributedDataParallel and ZeRO-3 over
// it giving one process's gradients and step. Several GPU ranks need several GPUs; the CPU
// suite (tests/distributed/) runs 2 and 4 ranks over Gloo.
// Also, as this is the CUDA executable that links autograd: checkpoint's recomputation of dropout
// from cuda:0's generator state, and autocast's weight-cast cache on cuda:0.
// Built with the CUDA suite; without a device its main returns 77 (skipped).
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "autograd/autograd.h"
#include "distributed/distributed_data_parallel.h"
#include "distributed/error.h"
#include "distributed/process_group.h"
#include "distributed/zero_data_parallel.h"
#include "engine/memgrad.h"
#include "engine/nn/functional.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"
#include "memgrad_build_config.h"

using namespace memgrad;
using namespace memgrad::distributed;

namespace {

const Device kGpu("cuda:0");

TensorOptions on_gpu(DType dtype = kFloat32) { return TensorOptions(dtype).with_device(kGpu); }

std::shared_ptr<nn::Sequential> make_model() {
  manual_seed(11);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
      std::make_shared<nn::Linear>(6, 16, nn::LinearOptions{true, kGpu, kFloat32}),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 4, nn::LinearOptions{true, kGpu, kFloat32})});
}

}  // namespace

TEST_SUITE("cuda") {

#if MEMGRAD_WITH_NCCL

TEST_CASE("nccl on one GPU: collectives of world size 1 give PyTorch's results") {
  auto pg = init_process_group(Backend::Nccl, 0, 1, std::nullopt);
  CHECK_EQ(pg->device(), kGpu);
  CHECK_EQ(pg->backend(), Backend::Nccl);
  Tensor t = arange(6, on_gpu()).add(1.0);  // 1..6
  pg->all_reduce(t, ReduceOp::Sum);
  CHECK_EQ(t.sum().item<double>(), 21.0);
  pg->all_reduce(t, ReduceOp::Avg);
  CHECK_EQ(t.sum().item<double>(), 21.0);
  Tensor out = empty({6}, on_gpu());
  pg->reduce_scatter(out, t, ReduceOp::Sum);
  CHECK_EQ(out.to(kCPU).to_vector<float>(), t.to(kCPU).to_vector<float>());
  Tensor gathered = zeros({6}, on_gpu());
  pg->all_gather(gathered, t);
  CHECK_EQ(gathered.to(kCPU).to_vector<float>(), t.to(kCPU).to_vector<float>());
  pg->broadcast(t, 0);
  pg->barrier();
  CHECK_GE(pg->collectives_run(), 6u);
  // A group of one still runs each collective through NCCL, call check first: the two device
  // tensors the call descriptions travel in (40 bytes each, as allocated at least that) show in
  // the peak; a group that skipped the transport would allocate nothing here.
  auto device_peak_of = [&](auto&& collective) {
    reset_peak_memory_stats(kGpu);
    const auto before = static_cast<int64_t>(memory_allocated(kGpu));
    collective();
    return static_cast<int64_t>(max_memory_allocated(kGpu)) - before;
  };
  CHECK_GE(device_peak_of([&] { pg->all_reduce(t, ReduceOp::Sum); }), 80);
  CHECK_GE(device_peak_of([&] { pg->reduce_scatter(out, t, ReduceOp::Avg); }), 80);
  CHECK_GE(device_peak_of([&] { pg->broadcast(t, 0); }), 80);
  CHECK_GE(device_peak_of([&] { pg->barrier(); }), 80);
  CHECK_EQ(out.to(kCPU).to_vector<float>(), t.to(kCPU).to_vector<float>());
  // The call checks hold on NCCL too: a CPU tensor or a non-contiguous one is refused.
  CHECK_THROWS_AS(pg->all_reduce(ones({3})), Error);
  CHECK_THROWS_AS(pg->all_reduce(ones({2, 3}, on_gpu()).t()), ValueError);
  CHECK_FALSE(pg->wire_bytes_sent().has_value());  // NCCL's traffic is not on our sockets
}

TEST_CASE("nccl on one GPU: DDP's and ZeRO-3's gradients and step are one process's") {
  auto pg = init_process_group(Backend::Nccl, 0, 1, std::nullopt);
  manual_seed(3);
  const Tensor x = randn({8, 6}).to(kGpu);
  const Tensor y = randint(0, 4, {8}).to(kGpu);

  auto plain = make_model();
  nn::cross_entropy((*plain)(x), y).backward();

  auto wrapped = make_model();
  DistributedDataParallel ddp(wrapped, pg);
  nn::cross_entropy(ddp(x), y).backward();
  CHECK_EQ(ddp.buckets_reduced(), 1u);
  const auto a = plain->parameters(), b = wrapped->parameters();
  REQUIRE_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK_EQ(a[i].grad().to(kCPU).to_vector<float>(), b[i].grad().to(kCPU).to_vector<float>());
  }

  // ZeRO-3 on one rank: the shards are the whole parameters; one Adam step matches.
  auto sharded_model = make_model();
  ZeroDataParallel zero(sharded_model, pg, ZeroOptions{3});
  optim::Adam sharded_adam(zero.shard_parameters(), {.lr = 1e-2});
  nn::cross_entropy(zero(x), y).backward();
  zero.step(sharded_adam);
  optim::Adam adam(plain->parameters(), {.lr = 1e-2});
  adam.step();
  const Tensor after = nn::cross_entropy((*plain)(x), y);
  const Tensor sharded_after = nn::cross_entropy(zero(x), y);
  CHECK(sharded_after.item<double>() == doctest::Approx(after.item<double>()).epsilon(1e-5));
}

#else

TEST_CASE("without NCCL's header the nccl backend says what is missing") {
  CHECK_THROWS_WITH_AS(init_process_group(Backend::Nccl, 0, 1, std::nullopt),
                       doctest::Contains("nccl.h"), DistributedError);
}

#endif

TEST_CASE("checkpoint on cuda:0 recomputes dropout's mask from cuda:0's saved generator state") {
  // Dropout of ones: the output is the mask times 2, and so is the input's gradient, exactly,
  // when the recomputation draws the forward's mask. Without preserving the state it draws the
  // next 1000 values instead (equal to the first with probability 2^-1000).
  auto fn = [](const Tensor& h) { return nn::dropout(h, 0.5, /*training=*/true); };
  for (bool preserve : {true, false}) {
    CAPTURE(preserve);
    manual_seed(21);
    const GeneratorState cpu_before = default_generator(kCPU).get_state();
    const GeneratorState before = default_generator(kGpu).get_state();
    const Tensor x = ones({1000}, on_gpu().with_requires_grad());
    const Tensor y = autograd::checkpoint(fn, x, preserve);
    const GeneratorState after_forward = default_generator(kGpu).get_state();
    // The mask was drawn on cuda:0 from its own generator: (1000 + 3) / 4 Philox counters.
    CHECK_EQ(after_forward.offset, before.offset + 250);
    CHECK(default_generator(kCPU).get_state() == cpu_before);
    y.sum().backward();
    const std::vector<float> mask = y.to(kCPU).to_vector<float>();
    const std::vector<float> grad = x.grad().to(kCPU).to_vector<float>();
    if (preserve) {
      CHECK(grad == mask);
      // The recomputation put cuda:0's generator back where the forward had left it.
      CHECK(default_generator(kGpu).get_state() == after_forward);
    } else {
      CHECK(grad != mask);
    }
  }
}

TEST_CASE("autocast on cuda:0: checkpoint backward inside the region, nested 16-bit regions") {
  manual_seed(5);
  nn::Linear lin(16, 16, nn::LinearOptions{true, kGpu, kFloat32});
  const Tensor x = randn({4, 16}, on_gpu());
  {
    autograd::AutocastGuard region(true, kFloat16);
    // The region's first use of the weight is the segment's forward, without grad, so that is
    // where its float16 cast is made and cached; the recomputation in this backward, inside the
    // region, takes that cast, which must still lead back to the weight.
    const Tensor y = autograd::checkpoint([&](const Tensor& h) { return lin.forward(h); }, x);
    y.to(kFloat32).sum().backward();
  }
  REQUIRE(lin.weight().grad().defined());
  REQUIRE(lin.bias().grad().defined());
  const std::vector<float> ckpt = lin.weight().grad().to(kCPU).to_vector<float>();
  lin.zero_grad();
  {
    autograd::AutocastGuard region(true, kFloat16);
    lin.forward(x).to(kFloat32).sum().backward();
  }
  const std::vector<float> plain = lin.weight().grad().to(kCPU).to_vector<float>();
  REQUIRE_EQ(ckpt.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    CAPTURE(i);
    // The same float16 products either way; float16's precision bounds any GEMM difference.
    CHECK(ckpt[i] == doctest::Approx(plain[i]).epsilon(1e-3));
  }
  // A bfloat16 region inside a float16 one casts the weight itself, not to the cached float16.
  autograd::AutocastGuard outer(true, kFloat16);
  CHECK_EQ(lin.forward(x).dtype(), kFloat16);
  {
    autograd::AutocastGuard inner(true, kBFloat16);
    CHECK_EQ(lin.forward(x).dtype(), kBFloat16);
  }
  CHECK_EQ(lin.forward(x).dtype(), kFloat16);
}

}  // TEST_SUITE("cuda")
