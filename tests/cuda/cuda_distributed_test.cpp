// The nccl backend on one GPU: a process group of world size 1 on cuda:0 (NCCL's communicator of
// one rank, no store), its collectives with PyTorch's results, each run through NCCL (call check
// included) even for one rank, the argument checks, and DistributedDataParallel and ZeRO-3 over
// it giving one process's gradients and step. Several GPU ranks need several GPUs; the CPU
// suite (tests/distributed/) runs 2 and 4 ranks over Gloo.
// Built with the CUDA suite; without a device its main returns 77 (skipped).
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <optional>

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
}  // TEST_SUITE("cuda")
