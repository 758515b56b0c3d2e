// DistributedDataParallel on 2 and 4 CPU ranks: the averaged gradients equal the single-process
// gradients of the same global batch (with and without bucket views, across several buckets, and
// with no_sync accumulation), rank 0's weights reach every rank, views save the gradients'
// bytes, a bucket is all-reduced during backward, before the earlier layers' gradients, and
// DDP overlaps by default only where the host has a core for each rank's communication thread.
#include <doctest/doctest.h>
#include <omp.h>
#include <sched.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/autograd.h"
#include "distributed/distributed_data_parallel.h"
#include "distributed/error.h"
#include "engine/memgrad.h"
#include "engine/nn/functional.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "tests/distributed/workers.h"

using namespace memgrad;
using namespace memgrad::distributed;
using memgrad::testing::check;
using memgrad::testing::failures;
using memgrad::testing::outputs;
using memgrad::testing::run_workers;

namespace {

constexpr int64_t kBatch = 8;  // global: 8 / N rows per rank

std::shared_ptr<nn::Sequential> make_model() {
  manual_seed(7);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
      std::make_shared<nn::Linear>(6, 16), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 4)});
}

// The largest |a - b| / max(1, |b|) over two tensors' elements.
double max_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double worst = x.size() == y.size() ? 0.0 : 1e30;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    worst = std::max(worst, std::abs(x[i] - y[i]) / std::max(1.0, std::abs(y[i])));
  }
  return worst;
}

// What both workers start from: the group, one global batch (the same on every rank) and a
// model trained on all of it in this one process, whose gradients DDP's must equal.
struct Setup {
  std::shared_ptr<ProcessGroup> pg = init_process_group(Backend::Gloo);
  int rank = pg->rank();
  int64_t rows = kBatch / pg->size();  // this rank's share: rows [rank * rows, (rank + 1) * rows)
  Tensor x, y;
  std::shared_ptr<nn::Sequential> reference = make_model();

  Setup() {
    Generator g(5);
    x = randn({kBatch, 6}, {}, &g);
    y = randint(0, 4, {kBatch}, TensorOptions(kInt64), &g);
    nn::cross_entropy((*reference)(x), y).backward();
  }

  // Checks every parameter's gradient in `model` against the reference's; `when` names the moment.
  void check_gradients(nn::Module& model, const std::string& when) const {
    const auto ref = reference->named_parameters();
    const auto got = model.named_parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      const double difference = max_difference(got[i].second.grad(), ref[i].second.grad());
      check(difference < 1e-6,
            fmt::format("{}: {}'s gradient differs by {}", when, got[i].first, difference));
    }
  }
};

bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::string(value) == "1";
}

// DDP_VIEW=1: gradient_as_bucket_view; DDP_CAP: bucket_cap_mb, the first bucket's cap too.
int ddp_worker() {
  const bool views = env_flag("DDP_VIEW");
  const double cap = std::getenv("DDP_CAP") != nullptr ? std::atof(std::getenv("DDP_CAP")) : 25.0;
  const Setup setup;
  // Every rank but 0 starts from other weights: the broadcast must replace them.
  auto model = make_model();
  if (setup.rank != 0) {
    NoGradGuard no_grad;
    for (Tensor p : model->parameters()) p.add_(static_cast<double>(setup.rank));
  }
  DistributedDataParallel ddp(
      model, setup.pg,
      {.bucket_cap_mb = cap, .gradient_as_bucket_view = views, .first_bucket_cap_mb = cap});
  const Tensor xr = setup.x.narrow(0, setup.rank * setup.rows, setup.rows);
  const Tensor yr = setup.y.narrow(0, setup.rank * setup.rows, setup.rows);
  for (int step = 0; step < 2; ++step) {  // the second backward runs with .grad already views
    nn::cross_entropy(ddp(xr), yr).backward();
    setup.check_gradients(*model, fmt::format("step {}", step));
    ddp.zero_grad();
  }
  // Buckets: reverse registration order, closed at the cap.
  const std::vector<BucketInfo> buckets = ddp.buckets();
  check(buckets.front().parameters.front() == "2.bias", buckets.front().parameters.front());
  if (cap < 0.001) check(buckets.size() > 1, fmt::format("{} buckets", buckets.size()));
  int64_t total = 0;
  for (const BucketInfo& b : buckets) total += b.numel;
  check(total == model->num_parameters(), "every parameter in one bucket");
  // With views the gradients are the buckets: after zero_grad they still exist (zeroed), and
  // no gradient has storage of its own.
  for (const Tensor& p : model->parameters()) {
    check(views == p.grad().defined(), views ? "views stay after zero_grad" : "grads freed");
  }
  return failures() == 0 ? 0 : 1;
}

// no_sync: the first half of the rank's rows without communication, the second with; the sum
// of the two half-losses / 2 has the whole batch's gradient.
int no_sync_worker() {
  const Setup setup;
  auto model = make_model();
  DistributedDataParallel ddp(model, setup.pg, {25.0, env_flag("DDP_VIEW")});
  const int64_t half = setup.rows / 2, first = setup.rank * setup.rows;
  auto half_loss = [&](int64_t start) {
    return nn::cross_entropy(ddp(setup.x.narrow(0, start, half)), setup.y.narrow(0, start, half)) /
           2.0;
  };
  {
    auto guard = ddp.no_sync();
    half_loss(first).backward();
  }
  check(ddp.buckets_reduced() == 0, "no_sync communicates nothing");
  half_loss(first + half).backward();
  check(ddp.buckets_reduced() == ddp.buckets().size(), "then every bucket once");
  setup.check_gradients(*model, "after no_sync and a synced backward");
  return failures() == 0 ? 0 : 1;
}

// Two buckets (the last layer's parameters, then the first layer's): the first starts its
// all-reduce during backward, as soon as its gradients are in, before the first layer's backward
// runs, in every step: also in the second, whose forward reuses the AccumulateGrad nodes the
// first step's loss kept alive (a hook on the first layer's output gradient, which runs just
// before that layer's backward, sees one bucket started). Hooks registered before DDP's on the
// first layer's parameters see one bucket started;
// with DDP_OVERLAP=1 none is reduced yet (it is in flight on the communication thread while
// backward computes), without it the first is reduced already (blocking). After backward both
// are, and the gradients are the whole batch's. And the in-flight bucket holds no byte more: the
// step's peak of allocated bytes is the same with and without overlap (printed, compared by the
// test case across the two runs).
int overlap_worker() {
  const bool overlap = env_flag("DDP_OVERLAP");
  const Setup setup;
  auto model = make_model();
  DistributedDataParallel* ddp_seen = nullptr;
  uint64_t started_before = 0, reduced_before = 0;  // the counts when the step began
  std::vector<uint64_t> started_at, reduced_at;     // as each first-layer gradient arrived
  std::vector<uint64_t> started_below;  // when the gradient of the first layer's output arrived
  for (const auto& [name, p] : model->named_parameters()) {
    if (name.rfind("0.", 0) != 0) continue;
    p.register_post_accumulate_grad_hook([&](const Tensor&) {
      started_at.push_back(ddp_seen->buckets_started() - started_before);
      reduced_at.push_back(ddp_seen->buckets_reduced() - reduced_before);
    });
  }
  (*model)[0]->register_forward_hook([&](nn::UnaryModule&, const Tensor&, const Tensor& out) {
    out.register_hook([&](const Tensor&) {
      started_below.push_back(ddp_seen->buckets_started() - started_before);
      return Tensor();
    });
  });
  DistributedDataParallel ddp(
      model, setup.pg,
      {.bucket_cap_mb = 0.0002, .first_bucket_cap_mb = 0.0002, .overlap = overlap});
  ddp_seen = &ddp;
  check(ddp.buckets().size() == 2, fmt::format("{} buckets", ddp.buckets().size()));
  check(ddp.buckets()[1].parameters.front() == "0.bias", ddp.buckets()[1].parameters.front());
  const Tensor xr = setup.x.narrow(0, setup.rank * setup.rows, setup.rows);
  const Tensor yr = setup.y.narrow(0, setup.rank * setup.rows, setup.rows);
  Tensor loss;  // kept into the next step's forward, as a training loop keeps it
  for (int step = 0; step < 2; ++step) {
    ddp.zero_grad();
    started_before = ddp.buckets_started();
    reduced_before = ddp.buckets_reduced();
    started_at.clear();
    reduced_at.clear();
    started_below.clear();
    reset_peak_memory_stats(kCPU);
    loss = nn::cross_entropy(ddp(xr), yr);
    loss.backward();
    if (step == 0) std::printf("peak allocated: %zu\n", max_memory_allocated(kCPU));
    check(started_below == std::vector<uint64_t>{1},
          fmt::format("step {}: buckets started when the first layer's backward began: {} "
                      "(expected 1)",
                      step, fmt::join(started_below, ", ")));
    check(started_at == std::vector<uint64_t>{1, 1},
          fmt::format("step {}: buckets started as the first layer's gradients arrived: {} "
                      "(expected 1, 1)",
                      step, fmt::join(started_at, ", ")));
    const std::vector<uint64_t> reduced_expected =
        overlap ? std::vector<uint64_t>{0, 0} : std::vector<uint64_t>{1, 1};
    check(reduced_at == reduced_expected,
          fmt::format("step {}: buckets reduced as the first layer's gradients arrived: {} "
                      "(expected {})",
                      step, fmt::join(reduced_at, ", "), fmt::join(reduced_expected, ", ")));
    check(ddp.buckets_reduced() - reduced_before == 2,
          fmt::format("step {}: {} buckets reduced", step, ddp.buckets_reduced() - reduced_before));
    setup.check_gradients(*model, fmt::format("after the overlapped backward of step {}", step));
  }
  return failures() == 0 ? 0 : 1;
}

// The "peak allocated: N" line of rank 0's output.
std::string peak_line(const SpawnResult& result) {
  const std::string& out = result.ranks.at(0).output;
  const size_t at = out.find("peak allocated: ");
  return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
}

// Ranks that wrap the model with different bucket caps: their bucket all-reduces skip the call
// check, so the constructor compares the buckets. LAYOUT=count: rank 1 has one bucket more, a
// CollectiveMismatchError on every rank; LAYOUT=sizes: as many buckets, of other sizes, a
// DistributedError on rank 1 naming both layouts (rank 0's layout is the reference: it goes on).
int layout_worker() {
  const std::string layout = std::getenv("LAYOUT");
  const Setup setup;
  auto model = make_model();  // 2.bias (4), 2.weight (64), 0.bias (16), 0.weight (96)
  DDPOptions options;
  if (layout == "count" && setup.rank == 1)
    options = {.bucket_cap_mb = 0.0002, .first_bucket_cap_mb = 0.0002};
  if (layout == "sizes") {
    options.first_bucket_cap_mb = setup.rank == 0 ? 0.00001 : 0.0002;  // 10 B or 209 B
  }
  try {
    DistributedDataParallel ddp(model, setup.pg, options);
    check(layout == "sizes" && setup.rank == 0, "the constructor accepted differing buckets");
  } catch (const CollectiveMismatchError& e) {
    check(layout == "count", e.what());
  } catch (const DistributedError& e) {
    const std::string what = e.what();
    check(layout == "sizes" && setup.rank == 1 &&
              what.find("hold 68, 112 elements, rank 0's 4, 176") != std::string::npos,
          what);
  }
  return failures() == 0 ? 0 : 1;
}

const bool kRegistered = memgrad::testing::register_worker("ddp", ddp_worker) &&
                         memgrad::testing::register_worker("no_sync", no_sync_worker) &&
                         memgrad::testing::register_worker("overlap", overlap_worker) &&
                         memgrad::testing::register_worker("layout", layout_worker);

}  // namespace

TEST_SUITE("distributed") {
TEST_CASE("DDP's averaged gradients equal one process's gradients of the same global batch") {
  for (int n : {2, 4}) {
    for (const char* view : {"0", "1"}) {
      for (const char* cap : {"25", "0.0002"}) {  // one bucket; several (0.0002 MiB = 209 B)
        CAPTURE(n);
        CAPTURE(view);
        CAPTURE(cap);
        const SpawnResult result =
            run_workers("ddp", n, 20, {{"DDP_VIEW", view}, {"DDP_CAP", cap}});
        INFO(outputs(result));
        CHECK(result.ok());
      }
    }
  }
}

TEST_CASE("DDP all-reduces a bucket during backward, as soon as its gradients are in") {
  for (int n : {2, 4}) {
    CAPTURE(n);
    std::string peaks[2];
    for (int overlap : {0, 1}) {
      CAPTURE(overlap);
      const SpawnResult result =
          run_workers("overlap", n, 20, {{"DDP_OVERLAP", overlap == 1 ? "1" : "0"}});
      INFO(outputs(result));
      CHECK(result.ok());
      peaks[overlap] = peak_line(result);
    }
    CHECK(!peaks[0].empty());
    CHECK(peaks[0] == peaks[1]);  // the bucket in flight costs no byte
  }
}

TEST_CASE(
    "DDP overlaps by default only where every rank's threads and its communication "
    "thread have a core") {
  CHECK_FALSE(overlap_fits(2, 2, 1));  // 2 ranks of 1 thread on 2 cores: blocking
  CHECK(overlap_fits(4, 2, 1));
  CHECK(overlap_fits(2, 1, 1));
  CHECK_FALSE(overlap_fits(1, 1, 1));
  CHECK(overlap_fits(16, 2, 7));
  CHECK_FALSE(overlap_fits(16, 2, 8));

  // A group of one on this thread, whose CPUs are cut to one, then two where the machine has
  // them (DDP reads the calling thread's affinity), with one OpenMP thread.
  cpu_set_t saved;
  REQUIRE(sched_getaffinity(0, sizeof(saved), &saved) == 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &saved)) cpus.push_back(c);
  }
  struct Restore {
    cpu_set_t& set;
    int threads = omp_get_max_threads();
    ~Restore() {
      sched_setaffinity(0, sizeof(set), &set);
      omp_set_num_threads(threads);
    }
  } restore{saved};
  omp_set_num_threads(1);
  const std::shared_ptr<ProcessGroup> pg = init_process_group(Backend::Gloo, 0, 1, std::nullopt);
  auto overlaps_on = [&](size_t count, std::optional<bool> overlap) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (size_t i = 0; i < count; ++i) CPU_SET(cpus[i], &set);
    REQUIRE(sched_setaffinity(0, sizeof(set), &set) == 0);
    DistributedDataParallel ddp(make_model(), pg, {.overlap = overlap});
    return ddp.overlaps();
  };
  CHECK_FALSE(overlaps_on(1, std::nullopt));
  CHECK(overlaps_on(1, true));
  if (cpus.size() >= 2) {
    CHECK(overlaps_on(2, std::nullopt));
    CHECK_FALSE(overlaps_on(2, false));
  }

  // LOCAL_WORLD_SIZE counts the ranks on this host: more than the group's, or not a number, is
  // refused with the value; one forced overlap does not read it.
  const char* launched = std::getenv("LOCAL_WORLD_SIZE");
  const std::optional<std::string> saved_local =
      launched ? std::optional<std::string>(launched) : std::nullopt;
  for (const char* bad : {"2", "0", "two"}) {
    CAPTURE(bad);
    setenv("LOCAL_WORLD_SIZE", bad, 1);
    const std::string refusal = fmt::format("LOCAL_WORLD_SIZE={} is not an integer in [1, 1]", bad);
    CHECK_THROWS_WITH_AS(DistributedDataParallel(make_model(), pg),
                         doctest::Contains(refusal.c_str()), DistributedError);
    CHECK(DistributedDataParallel(make_model(), pg, {.overlap = true}).overlaps());
  }
  setenv("LOCAL_WORLD_SIZE", "1", 1);
  CHECK_NOTHROW(DistributedDataParallel(make_model(), pg));
  if (saved_local) {
    setenv("LOCAL_WORLD_SIZE", saved_local->c_str(), 1);
  } else {
    unsetenv("LOCAL_WORLD_SIZE");
  }
}

TEST_CASE("DDP refuses ranks whose buckets differ, before any unchecked all-reduce") {
  for (const char* layout : {"count", "sizes"}) {
    CAPTURE(layout);
    const SpawnResult result = run_workers("layout", 2, 20, {{"LAYOUT", layout}}, false);
    INFO(outputs(result));
    CHECK(result.ok());
  }
}

TEST_CASE("DDP's no_sync accumulates locally; the next synced backward reduces the sum") {
  for (int n : {2, 4}) {
    for (const char* view : {"0", "1"}) {
      CAPTURE(n);
      CAPTURE(view);
      const SpawnResult result = run_workers("no_sync", n, 20, {{"DDP_VIEW", view}});
      INFO(outputs(result));
      CHECK(result.ok());
    }
  }
}
}  // TEST_SUITE("distributed")
