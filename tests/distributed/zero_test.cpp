// ZeRO stages 1-3 (and DDP) on 2 and 4 CPU ranks through B22's own measurement
// (examples/behaviours/b22_tensor_sharding.cpp): each rank's bytes of parameters, gradients,
// optimizer state, buckets, reduction buffers and gathered parameters exactly as B22 expects
// them from the shapes, the held total equal to memory_allocated(), the allocator's peak during a
// step at least the transient bytes B22 expects (gradients, or reduction + gathered), the losses
// equal to one process's within B22's tolerance, and at least the collectives' payload on the
// wire.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "distributed/process_group.h"
#include "distributed/zero_data_parallel.h"
#include "engine/memgrad.h"
#include "engine/nn/linear.h"
#include "engine/nn/sequential.h"
#include "engine/optim/optimizer.h"
#include "examples/behaviours/b22_tensor_sharding.h"
#include "tests/distributed/workers.h"

using namespace memgrad;
using namespace memgrad::examples;
using memgrad::testing::check;
using memgrad::testing::failures;
using memgrad::testing::outputs;
using memgrad::testing::run_workers;

namespace {

// Small enough to be quick; the head layer (32 x 10 + 10 = 330 elements) needs padding on 4
// ranks (332), so the padding is checked too. MASTER=1: bfloat16 parameters and gradients with
// float32 master weights (the batch of 24 splits into 2, 3 and 4 ranks).
ShardingRun small_run() {
  ShardingRun run;
  run.inputs = 24;
  run.hidden = 32;
  run.batch = 24;
  run.steps = 3;
  const char* master = std::getenv("MASTER");
  if (master != nullptr && std::string(master) == "1") {
    run.dtype = kBFloat16;
    run.master_weights = true;
  }
  return run;
}

void check_bytes(const char* what, int64_t measured, int64_t expected) {
  check(measured == expected,
        fmt::format("{}: measured {} B, expected {} B", what, measured, expected));
}

// SHARDING names the configuration.
int sharding_worker() {
  const Sharding s = *sharding_from_key(std::getenv("SHARDING"));
  const ShardingRun run = small_run();
  const RankMeasurement single = run_sharding_rank(Sharding::Single, run, nullptr);
  auto pg = distributed::init_process_group(distributed::Backend::Gloo);
  const RankMeasurement m = run_sharding_rank(s, run, pg);
  const ShardingBytes e = expected_sharding_bytes(s, pg->size(), run);
  check_bytes("parameters", m.bytes.parameters, e.parameters);
  check_bytes("gradients", m.bytes.gradients, e.gradients);
  check_bytes("optimizer state", m.bytes.optimizer_state, e.optimizer_state);
  check_bytes("buckets", m.bytes.buckets, e.buckets);
  check_bytes("reduction peak", m.bytes.reduction, e.reduction);
  check_bytes("gathered peak", m.bytes.gathered, e.gathered);
  check_bytes("held (memory_allocated)", m.held_measured, e.held());
  // The allocator's own peak shows what the step made and freed: the gradients, or one unit's
  // reduction with its gathered parameters.
  const int64_t floor = peak_above_held_floor(s, pg->size(), run);
  check(m.peak_above_held >= floor, fmt::format("peak above held: measured {} B, at least {} B "
                                                "expected",
                                                m.peak_above_held, floor));
  // bfloat16 gradients summed in another order differ from one process's at 2^-8 per sum.
  const double tolerance = run.master_weights ? 1e-3 : 1e-5;
  for (size_t k = 0; k < m.losses.size(); ++k) {
    const double diff = std::abs(m.losses[k] - single.losses[k]) / std::abs(single.losses[k]);
    check(diff <= tolerance, fmt::format("step {}: loss {} against {} in one process", k + 1,
                                         m.losses[k], single.losses[k]));
  }
  const int64_t payload = expected_payload_per_step(s, pg->size(), run);
  check(m.wire_bytes >= payload && m.wire_bytes < payload + 65536,
        fmt::format("sent {} B for a payload of {} B", m.wire_bytes, payload));
  return failures() == 0 ? 0 : 1;
}

// A model whose forward never uses one of its units.
class HalfUsed : public nn::UnaryModule {
 public:
  HalfUsed() {
    used_ = register_module("used", std::make_shared<nn::Linear>(6, 4));
    unused_ = register_module("unused", std::make_shared<nn::Linear>(6, 4));
  }
  Tensor forward(const Tensor& x) override { return (*used_)(x); }
  std::string name() const override { return "HalfUsed"; }

 private:
  std::shared_ptr<nn::Linear> used_, unused_;
};

std::vector<double> values_of(const Tensor& t) {
  std::vector<double> out;
  if (!t.defined()) return out;
  const Tensor d = t.detach().to(kFloat64).contiguous();
  const auto* v = static_cast<const double*>(d.data_ptr());
  out.assign(v, v + d.numel());
  return out;
}

// STAGE 2 or 3, with and without overlap: two backwards through the model itself (only its
// units' hooks run), then a step. One unit gets no gradient, so the last reduction of the first
// backward is still in flight when the second backward's gradients arrive. Both runs must end
// with the same shard gradients and parameters, and hold the same bytes after the step.
int overlap_edges_worker() {
  const int stage = std::atoi(std::getenv("STAGE"));
  auto pg = distributed::init_process_group(distributed::Backend::Gloo);
  std::vector<std::vector<double>> results;
  std::vector<int64_t> held;
  for (bool overlap : {false, true}) {
    const int64_t before = static_cast<int64_t>(memory_allocated(kCPU));
    {
      manual_seed(5);
      auto model = std::make_shared<HalfUsed>();
      distributed::ZeroDataParallel zero(model, pg, {stage, overlap});
      optim::SGD optimizer(zero.shard_parameters(), {.lr = 0.1});
      Generator g(9 + static_cast<uint64_t>(pg->rank()));
      const Tensor x = randn({3, 6}, {}, &g);
      for (int i = 0; i < 2; ++i) (*model)(x).sum().backward();
      std::vector<double> all;
      for (const Tensor& shard : zero.shard_parameters()) {
        for (double v : values_of(shard.grad())) all.push_back(v);
      }
      zero.step(optimizer);
      for (const Tensor& shard : zero.shard_parameters()) {
        for (double v : values_of(shard)) all.push_back(v);
      }
      results.push_back(all);
      held.push_back(static_cast<int64_t>(memory_allocated(kCPU)) - before);
    }
  }
  check(!results[0].empty() && results[0] == results[1],
        "the same shard gradients and parameters with and without overlap");
  check(held[0] == held[1],
        fmt::format("held after the step: {} B without overlap, {} B with", held[0], held[1]));
  return failures() == 0 ? 0 : 1;
}

// Stage 3, with and without overlap, on three Linear units: after a forward that records the
// graph only the last unit is still gathered (its backward comes first, without another
// all_gather); the next forward frees it before anything else; under no_grad every unit is freed
// right after its forward; after backward, and after step(), none is gathered.
int kept_unit_worker() {
  auto pg = distributed::init_process_group(distributed::Backend::Gloo);
  for (bool overlap : {false, true}) {
    manual_seed(4);
    std::vector<std::shared_ptr<nn::Linear>> layers = {std::make_shared<nn::Linear>(6, 8),
                                                       std::make_shared<nn::Linear>(8, 8),
                                                       std::make_shared<nn::Linear>(8, 512)};
    auto model = std::make_shared<nn::Sequential>(
        std::initializer_list<std::shared_ptr<nn::UnaryModule>>{layers[0], layers[1], layers[2]});
    distributed::ZeroDataParallel zero(model, pg, {3, overlap});
    optim::SGD optimizer(zero.shard_parameters(), {.lr = 0.1});
    const Tensor x = randn({2, 6});
    // Which layers hold their whole weight now ("" when none).
    auto gathered = [&layers] {
      std::string out;
      for (size_t i = 0; i < layers.size(); ++i) {
        if (layers[i]->weight().numel() > 0) out += std::to_string(i);
      }
      return out;
    };
    auto expect = [&](const char* when, const std::string& want) {
      check(gathered() == want, fmt::format("overlap {}: {}: gathered '{}', expected '{}'", overlap,
                                            when, gathered(), want));
    };
    Tensor loss = zero(x).sum();
    expect("after a forward", "2");
    loss = zero(x).sum();  // a second forward, the first one's graph dropped
    expect("after another forward", "2");
    const uint64_t sent = pg->wire_bytes_sent().value_or(0);
    loss.backward();
    expect("after backward", "");
    // Backward gathered units 0 and 1 again and reduce-scattered all three; each rank sends half
    // of each unit's float32 elements. Unit 2's gather (9,216 B) would exceed the slack.
    const int64_t units[] = {8 * 6 + 8, 8 * 8 + 8, 512 * 8 + 512};
    const int64_t payload =
        (units[0] + units[1]) / 2 * 4 + (units[0] + units[1] + units[2]) / 2 * 4;
    const auto in_backward = static_cast<int64_t>(pg->wire_bytes_sent().value_or(0) - sent);
    check(in_backward >= payload && in_backward < payload + units[2] / 2 * 4,
          fmt::format("overlap {}: backward sent {} B, the payload is {} B", overlap, in_backward,
                      payload));
    zero.step(optimizer);
    expect("after step", "");
    {
      NoGradGuard no_grad;
      zero(x);
      expect("after a forward under no_grad", "");
    }
    zero(x).sum();
    zero.step(optimizer);
    expect("after a forward, then step() without backward", "");
  }
  return failures() == 0 ? 0 : 1;
}

const bool kRegistered = memgrad::testing::register_worker("sharding", sharding_worker) &&
                         memgrad::testing::register_worker("overlap_edges", overlap_edges_worker) &&
                         memgrad::testing::register_worker("kept_unit", kept_unit_worker);

}  // namespace

TEST_SUITE("distributed") {
TEST_CASE("each ZeRO stage and DDP holds per rank exactly the bytes B22 expects, same losses") {
  // Stage 1: 4 + 4 + 8/N bytes per parameter; stage 2: 4 + 12/N; stage 3: 16/N plus the
  // largest unit gathered; each unit padded to a multiple of N, each tensor rounded to 512 B.
  for (int n : {2, 4}) {
    for (Sharding s : {Sharding::Ddp, Sharding::DdpBucketView, Sharding::Zero1, Sharding::Zero2,
                       Sharding::Zero3, Sharding::Zero2Overlap, Sharding::Zero3Overlap}) {
      CAPTURE(n);
      CAPTURE(sharding_key(s));
      const distributed::SpawnResult result =
          run_workers("sharding", n, 20, {{"SHARDING", sharding_key(s)}});
      INFO(outputs(result));
      CHECK(result.ok());
    }
  }
}

TEST_CASE("ZeRO 2-3 with overlap: an unused unit and backwards outside the wrapper") {
  for (const char* stage : {"2", "3"}) {
    CAPTURE(stage);
    const distributed::SpawnResult result = run_workers("overlap_edges", 2, 20, {{"STAGE", stage}});
    INFO(outputs(result));
    CHECK(result.ok());
  }
}

TEST_CASE("ZeRO-3 keeps the unit whose forward ended last gathered for its backward") {
  const distributed::SpawnResult result = run_workers("kept_unit", 2, 20);
  INFO(outputs(result));
  CHECK(result.ok());
}

TEST_CASE("with master weights each rank holds the bytes B22 expects at N = 2, 3 and 4") {
  // bfloat16 parameters and gradients, float32 master weights and Adam state: 2 + 2 + 12 bytes
  // per parameter unsharded; the N = 3 shards of 330 elements need padding (and 3 divides 24).
  for (int n : {2, 3, 4}) {
    for (Sharding s : {Sharding::Ddp, Sharding::Zero1, Sharding::Zero2, Sharding::Zero3,
                       Sharding::Zero3Overlap}) {
      CAPTURE(n);
      CAPTURE(sharding_key(s));
      const distributed::SpawnResult result =
          run_workers("sharding", n, 20, {{"SHARDING", sharding_key(s)}, {"MASTER", "1"}});
      INFO(outputs(result));
      CHECK(result.ok());
    }
  }
}

TEST_CASE("B22 refuses a rank count that does not divide the batch, naming both") {
  // A meta rank of 3 runs alone: the check comes before any tensor is made.
  auto pg = distributed::init_process_group(distributed::Backend::Nccl, 0, 3, std::nullopt, {}, -1,
                                            Device("meta:0"));
  ShardingRun run;
  run.batch = 64;
  CHECK_THROWS_WITH_AS(run_sharding_rank(Sharding::Zero1, run, pg),
                       doctest::Contains("a global batch of 64 rows does not split into 3 ranks"),
                       ValueError);
}

TEST_CASE("B22's state bytes come from the run's dtypes and optimizer") {
  ShardingRun run;
  const StateBytes fp32 = sharding_state_bytes(run);
  CHECK_EQ(fp32.total(), 16);  // 4 + 4 + 8
  CHECK_EQ(fp32.optimizer(), 8);
  run.dtype = kBFloat16;
  const StateBytes pure = sharding_state_bytes(run);  // Adam in bfloat16: 2 + 2 + 4
  CHECK_EQ(pure.total(), 8);
  run.master_weights = true;
  const StateBytes master = sharding_state_bytes(run);  // 2 + 2 + 12
  CHECK_EQ(master.parameter, 2);
  CHECK_EQ(master.gradient, 2);
  CHECK_EQ(master.optimizer(), 12);
  CHECK_EQ(master.total(), 16);
  // Any model: the units are its modules with parameters of their own.
  run.hidden = 64;
  const ModelShape shape = sharding_model_shape(run);
  REQUIRE_EQ(shape.units.size(), 3);
  CHECK_EQ(shape.units[0], std::vector<int64_t>{64 * 256, 64});
  CHECK_EQ(shape.units[2], std::vector<int64_t>{10 * 64, 10});
  CHECK_EQ(shape.parameters(), sharding_parameter_count(run));
}

TEST_CASE("B22's expectations are the ZeRO formulas when nothing needs rounding or padding") {
  // Units of h (in + 1), h (h + 1) and c (h + 1) elements: with in = h = 511 and c = 512 each is
  // a multiple of 512 = 4 x 128 elements, so every shard on 2 or 4 ranks is a whole number of
  // 512-byte blocks and the exact expectation is the formula times the parameter count.
  ShardingRun run;
  run.inputs = 511;
  run.hidden = 511;
  run.classes = 512;
  const int64_t psi = sharding_parameter_count(run);
  for (int n : {2, 4}) {
    CAPTURE(n);
    CHECK_EQ(expected_sharding_bytes(Sharding::Zero1, n, run).held(), (8 + 8 / n) * psi);
    CHECK_EQ(expected_sharding_bytes(Sharding::Zero2, n, run).held(), 4 * psi + 12 * psi / n);
    CHECK_EQ(expected_sharding_bytes(Sharding::Zero3, n, run).held(), 16 * psi / n);
    CHECK_EQ(expected_sharding_bytes(Sharding::Zero3, n, run).gathered,
             4 * sharding_largest_layer(run));
    // With overlap the next unit is gathered, and the next unit's gradients filled, meanwhile:
    // the largest two consecutive units (here the hidden layer and the head, 511 x 512 and
    // 512 x 512 elements: the head reduces, with its staging, while the hidden layer's
    // gradients fill), the same model states.
    CHECK_EQ(expected_sharding_bytes(Sharding::Zero3Overlap, n, run).gathered,
             4 * (511 * 512 + 512 * 512));
    CHECK_EQ(expected_sharding_bytes(Sharding::Zero3Overlap, n, run).reduction,
             4 * (2 * 512 * 512 + 511 * 512));
    CHECK_EQ(expected_sharding_bytes(Sharding::Zero2Overlap, n, run).reduction,
             4 * (2 * 512 * 512 + 511 * 512));
    CHECK_EQ(expected_sharding_bytes(Sharding::Zero3Overlap, n, run).held(), 16 * psi / n);
    // Unsharded, each of the 6 tensors rounds up by less than 512 B per copy (parameters,
    // gradients, 2 Adam moments; DDP also its bucket).
    const int64_t ddp = expected_sharding_bytes(Sharding::Ddp, n, run).held();
    CHECK(ddp >= 20 * psi);
    CHECK(ddp < 20 * psi + 5 * 6 * 512);
  }
  const int64_t single = expected_sharding_bytes(Sharding::Single, 1, run).held();
  CHECK(single >= 16 * psi);
  CHECK(single < 16 * psi + 4 * 6 * 512);
  // With master weights (P = G = 2, K = 12) the units are multiples of 1024 elements on 2 and 4
  // ranks only if twice as large: 2-byte shards of 128 elements are 256 B. The formulas hold
  // for the optimizer state (4-byte elements) and for stage 3 as a whole with N = 2.
  ShardingRun master = run;
  master.dtype = kBFloat16;
  master.master_weights = true;
  CHECK_EQ(expected_sharding_bytes(Sharding::Zero1, 2, master).optimizer_state, 12 * psi / 2);
  CHECK_EQ(expected_sharding_bytes(Sharding::Zero3, 2, master).held(), 16 * psi / 2);
  CHECK_EQ(formula_bytes_per_parameter(Sharding::Zero2, 4, sharding_state_bytes(master)),
           2 + 14.0 / 4);
}
}  // TEST_SUITE("distributed")
