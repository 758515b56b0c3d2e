// Process groups on meta devices (rank r of N alone, no peers): each collective allocates what
// the engine it stands for allocates, byte for byte, and nothing else; Gloo groups on sim:N.
#include <doctest/doctest.h>

#include "distributed/error.h"
#include "distributed/process_group.h"
#include "engine/memgrad.h"

using namespace memgrad;
using namespace memgrad::distributed;

namespace {

// The allocator's smallest block: every small request is rounded up to a multiple of it.
constexpr int64_t kBlock = 512;

int64_t round_up(int64_t nbytes) { return (nbytes + kBlock - 1) / kBlock * kBlock; }

// The bytes `collective` holds at its peak on `device` above what was allocated before it, and
// checks that it gives them all back.
template <typename F>
int64_t peak_of(Device device, F&& collective) {
  const auto before = static_cast<int64_t>(memory_allocated(device));
  reset_peak_memory_stats(device);
  collective();
  CHECK_EQ(static_cast<int64_t>(memory_allocated(device)), before);
  return static_cast<int64_t>(max_memory_allocated(device)) - before;
}

}  // namespace

TEST_CASE("a meta rank of 64 needs no store and no peers") {
  const Device device("meta:3");
  auto pg = init_process_group(Backend::Nccl, 5, 64, std::nullopt, {}, -1, device);
  CHECK_EQ(pg->rank(), 5);
  CHECK_EQ(pg->size(), 64);
  CHECK_EQ(pg->device(), device);
  CHECK_EQ(pg->backend(), Backend::Nccl);
  const Tensor grads = empty({1 << 20}, TensorOptions(kFloat32).with_device(device));
  pg->all_reduce(grads, ReduceOp::Avg);
  CHECK_EQ(pg->collectives_run(), 1);
}

TEST_CASE("a meta rank allocates NCCL's call-check tensors and no staging") {
  const Device device("meta:4");
  const int world = 64;
  auto pg = init_process_group(Backend::Nccl, 0, world, std::nullopt, {}, -1, device);
  const TensorOptions f32 = TensorOptions(kFloat32).with_device(device);
  // Five int64 per rank: this rank's row on the device, then every rank's.
  const int64_t check = round_up(5 * 8) + round_up(5 * 8 * world);
  const Tensor input = empty({world * 1024}, f32);
  const Tensor output = empty({1024}, f32);
  CHECK_EQ(peak_of(device, [&] { pg->all_reduce(input); }), check);
  CHECK_EQ(peak_of(device, [&] { pg->reduce_scatter(output, input); }), check);
  CHECK_EQ(peak_of(device, [&] { pg->all_gather(input, output); }), check);
  CHECK_EQ(peak_of(device, [&] { pg->broadcast(output, 3); }), check);
  // The barrier's call check, then its one staged float.
  CHECK_EQ(peak_of(device, [&] { pg->barrier(); }), check);
  CHECK_EQ(pg->staging_peak_nbytes(), 0);
}

TEST_CASE("a meta rank allocates Gloo's reduce-scatter staging and nothing else") {
  const Device device("meta:5");
  const int world = 4;
  auto pg = init_process_group(Backend::Gloo, 2, world, std::nullopt, {}, -1, device);
  const TensorOptions f32 = TensorOptions(kFloat32).with_device(device);
  const Tensor input = empty({world * 3000}, f32);
  const Tensor output = empty({3000}, f32);
  CHECK_EQ(peak_of(device, [&] { pg->all_reduce(input, ReduceOp::Avg); }), 0);
  CHECK_EQ(peak_of(device, [&] { pg->all_gather(input, output); }), 0);
  CHECK_EQ(peak_of(device, [&] { pg->barrier(); }), 0);
  const int64_t staging = round_up(static_cast<int64_t>(input.nbytes()));
  CHECK_EQ(peak_of(device, [&] { pg->reduce_scatter(output, input); }), staging);
  CHECK_EQ(pg->staging_peak_nbytes(), staging);
  // A Gloo group of one is local, as on the CPU: no staging.
  auto alone = init_process_group(Backend::Gloo, 0, 1, std::nullopt, {}, -1, device);
  CHECK_EQ(peak_of(device, [&] { alone->reduce_scatter(output, output); }), 0);
}

TEST_CASE("a meta group refuses what a real one refuses") {
  auto pg = init_process_group(Backend::Nccl, 1, 2, std::nullopt, {}, -1, Device("meta:6"));
  CHECK_THROWS_WITH_AS(pg->all_reduce(ones({4})),
                       doctest::Contains("tensor is on cpu, but this nccl process group works on "
                                         "meta:6"),
                       DeviceError);
  const Tensor wide = empty({2, 3}, TensorOptions().with_device(Device("meta:6")));
  CHECK_THROWS_WITH_AS(pg->all_gather(wide, wide), doctest::Contains("must hold world size (2)"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(
      init_process_group(Backend::Nccl, 2, 2, std::nullopt, {}, -1, Device("meta:6")),
      doctest::Contains("rank 2 is not in a world of size 2"), DistributedError);
  CHECK_THROWS_WITH_AS(
      init_process_group(Backend::Gloo, 0, 1, std::nullopt, {}, -1, Device("cuda:0")),
      doctest::Contains("the gloo backend works on cpu or sim:N (host memory), not on cuda:0"),
      DistributedError);
}

TEST_CASE("a Gloo group works on a simulated device's host memory") {
  const Device device("sim:7");
  auto pg = init_process_group(Backend::Gloo, 0, 1, std::nullopt, {}, -1, device);
  CHECK_EQ(pg->device(), device);
  Tensor t = full({3}, 2.0, TensorOptions(kFloat32).with_device(device));
  pg->all_reduce(t, ReduceOp::Avg);
  CHECK_EQ(t.sum().item<double>(), 6.0);
  CHECK_THROWS_WITH_AS(pg->all_reduce(ones({3})), doctest::Contains("works on sim:7"), DeviceError);
}
