// B22 -- tensor sharding, as DeepSpeed and FairScale do it (seed 001 §9d).
//
// The same MLP (256 -> 512 -> 512 -> 10, Adam, float32) trained for 5 steps on one global batch
// of 48, first in one process, then on N = 2 and N = 4 CPU ranks (real Gloo collectives over
// loopback) with DistributedDataParallel (with and without gradient_as_bucket_view) and with
// ZeRO stages 1, 2 and 3. Per rank, the bytes of each kind, expected from the model's units and
// the bytes per element its dtypes and optimizer use (read from the run, not assumed: each
// tensor rounded to 512 B, each ZeRO unit padded to a multiple of N) next to the bytes the
// allocator handed out for them; the losses of every configuration against the single process;
// and the bytes each rank sent per step, measured by the kernel on its sockets. Then the same
// with master weights (bfloat16 parameters and gradients, float32 master weights and Adam
// state: 2 + 2 + 12 bytes per parameter) for DDP and ZeRO 1/2/3 at N = 2, 3 and 4.
//
// The program starts its own ranks: it runs itself N times (distributed::spawn_ranks) with
// MEMGRAD_B22_WORKER naming the configuration; each rank prints one line of results.
//
//   ./memgrad example b22 [--size N]
//   ./memgrad launch -n 2 -- build/examples/behaviours/b22_tensor_sharding --worker zero3
#include "examples/behaviours/b22_tensor_sharding.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "distributed/distributed_data_parallel.h"
#include "distributed/zero_data_parallel.h"
#include "engine/nn/functional.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"
#include "examples/common/report.h"

namespace memgrad::examples {
namespace {

using distributed::ProcessGroup;

constexpr int64_t kBucketCap = 25 * 1024 * 1024;      // DDP's default bucket_cap_mb, in bytes
constexpr int64_t kFirstBucketCap = 1 * 1024 * 1024;  // and its first bucket's cap

int64_t padded(int64_t numel, int world) { return (numel + world - 1) / world * world; }

int64_t sum_of(const std::vector<int64_t>& v) {
  int64_t n = 0;
  for (int64_t x : v) n += x;
  return n;
}

// The run's model, in its dtype (initialised in float32 and converted, as a user would).
std::shared_ptr<nn::Sequential> make_model(const ShardingRun& run) {
  manual_seed(22);
  const nn::LinearOptions o{true, kCPU, kFloat32};
  auto model =
      std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
          std::make_shared<nn::Linear>(run.inputs, run.hidden, o), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(run.hidden, run.hidden, o), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(run.hidden, run.classes, o)});
  if (run.dtype != kFloat32) model->to(run.dtype);
  return model;
}

optim::Adam make_optimizer(const ShardingRun& run, std::vector<Tensor> params) {
  return optim::Adam(std::move(params), {.lr = 1e-3, .master_weights = run.master_weights});
}

int64_t storage_bytes(const Tensor& t) {
  return t.defined() ? static_cast<int64_t>(t.impl()->storage().allocated_nbytes()) : 0;
}

}  // namespace

bool is_stage3(Sharding s) { return s == Sharding::Zero3 || s == Sharding::Zero3Overlap; }

bool overlaps(Sharding s) { return s == Sharding::Zero2Overlap || s == Sharding::Zero3Overlap; }

const char* sharding_title(Sharding s) {
  switch (s) {
    case Sharding::Single: return "1 process";
    case Sharding::Ddp: return "DDP";
    case Sharding::DdpBucketView: return "DDP, bucket views";
    case Sharding::Zero1: return "ZeRO-1";
    case Sharding::Zero2: return "ZeRO-2";
    case Sharding::Zero3: return "ZeRO-3";
    case Sharding::Zero2Overlap: return "ZeRO-2, overlap";
    case Sharding::Zero3Overlap: return "ZeRO-3, overlap";
  }
  return "?";
}

const char* sharding_key(Sharding s) {
  switch (s) {
    case Sharding::Single: return "single";
    case Sharding::Ddp: return "ddp";
    case Sharding::DdpBucketView: return "ddp_view";
    case Sharding::Zero1: return "zero1";
    case Sharding::Zero2: return "zero2";
    case Sharding::Zero3: return "zero3";
    case Sharding::Zero2Overlap: return "zero2_overlap";
    case Sharding::Zero3Overlap: return "zero3_overlap";
  }
  return "?";
}

std::optional<Sharding> sharding_from_key(std::string_view key) {
  for (Sharding s :
       {Sharding::Single, Sharding::Ddp, Sharding::DdpBucketView, Sharding::Zero1, Sharding::Zero2,
        Sharding::Zero3, Sharding::Zero2Overlap, Sharding::Zero3Overlap}) {
    if (key == sharding_key(s)) return s;
  }
  return std::nullopt;
}

int64_t ModelShape::parameters() const {
  int64_t n = 0;
  for (const std::vector<int64_t>& u : units) n += sum_of(u);
  return n;
}

int64_t ModelShape::largest_unit() const {
  int64_t n = 0;
  for (const std::vector<int64_t>& u : units) n = std::max(n, sum_of(u));
  return n;
}

ModelShape model_shape(const nn::Module& model) {
  // ZeroDataParallel's walk: a module, then its children depth first.
  ModelShape shape;
  std::vector<const nn::Module*> stack = {&model};
  while (!stack.empty()) {
    const nn::Module* m = stack.back();
    stack.pop_back();
    std::vector<int64_t> unit;
    for (const auto& [name, t] : m->named_parameters(/*recurse=*/false)) unit.push_back(t.numel());
    if (!unit.empty()) shape.units.push_back(unit);
    const auto children = m->named_children();
    for (auto it = children.rbegin(); it != children.rend(); ++it)
      stack.push_back(it->second.get());
  }
  return shape;
}

StateBytes state_bytes_of(const optim::Optimizer& optimizer) {
  StateBytes b;
  const DType dtype = optimizer.params().empty() ? kFloat32 : optimizer.params()[0].dtype();
  const bool master = !optimizer.params().empty() && optimizer.has_master(0);
  b.parameter = b.gradient = static_cast<int64_t>(element_size(dtype));
  b.master = master ? 4 : 0;
  b.state_tensors = optimizer.state_tensors_per_parameter();
  b.state_element = master ? 4 : b.parameter;
  return b;
}

ModelShape sharding_model_shape(const ShardingRun& run) {
  NoGradGuard no_grad;
  return model_shape(*make_model(run));
}

StateBytes sharding_state_bytes(const ShardingRun& run) {
  // A model of one tiny layer in the run's dtype, and the run's optimizer over it.
  ShardingRun tiny = run;
  tiny.inputs = tiny.hidden = tiny.classes = 1;
  const std::shared_ptr<nn::Sequential> model = make_model(tiny);
  return state_bytes_of(make_optimizer(tiny, model->parameters()));
}

int64_t sharding_parameter_count(const ShardingRun& run) {
  return sharding_model_shape(run).parameters();
}

int64_t sharding_largest_layer(const ShardingRun& run) {
  return sharding_model_shape(run).largest_unit();
}

ShardingBytes expected_sharding_bytes(Sharding s, int world, const ModelShape& shape,
                                      const StateBytes& e) {
  ShardingBytes b;
  // The optimizer's state of `numel` elements: the master copy and each state tensor rounded.
  auto state = [&e](int64_t numel) {
    return (e.master > 0 ? rounded(e.master * numel) : 0) +
           e.state_tensors * rounded(e.state_element * numel);
  };
  if (s == Sharding::Single || s == Sharding::Ddp || s == Sharding::DdpBucketView) {
    std::vector<int64_t> numels;
    for (const std::vector<int64_t>& u : shape.units)
      numels.insert(numels.end(), u.begin(), u.end());
    for (int64_t n : numels) {
      b.parameters += rounded(e.parameter * n);
      b.optimizer_state += state(n);
      // With bucket views the gradients are the buckets' bytes.
      if (s != Sharding::DdpBucketView) b.gradients += rounded(e.gradient * n);
    }
    if (s != Sharding::Single) {
      // Buckets in reverse order, the first closed once it holds kFirstBucketCap bytes, the
      // others kBucketCap.
      int64_t bucket = 0;
      bool first = true;
      for (size_t k = numels.size(); k-- > 0;) {
        if (bucket >= (first ? kFirstBucketCap : kBucketCap)) {
          b.buckets += rounded(bucket);
          bucket = 0;
          first = false;
        }
        bucket += e.gradient * numels[k];
      }
      b.buckets += rounded(bucket);
    }
    return b;
  }
  // ZeRO: each unit padded to a multiple of N; this rank owns a shard of each.
  // Stage 3 gathers one unit at a time, with overlap also the next one (in forward or backward
  // order: the units' order) meanwhile. Stages 2-3 reduce one unit at a time: its full gradients
  // and a staging buffer of the same size, and with overlap the full gradients of the unit before
  // it, which backward fills meanwhile.
  int64_t previous_gathered = 0, previous_gradients = 0;
  for (const std::vector<int64_t>& u : shape.units) {
    const int64_t full = padded(sum_of(u), world);
    const int64_t shard = full / world;
    b.parameters += rounded(e.parameter * (is_stage3(s) ? shard : full));
    b.gradients += rounded(e.gradient * (s == Sharding::Zero1 ? full : shard));
    b.optimizer_state += state(shard);
    const int64_t next = overlaps(s) ? 1 : 0;  // a unit's neighbour alive at once, or not
    if (s != Sharding::Zero1) {
      const int64_t gradients = rounded(e.gradient * full);
      b.reduction = std::max(b.reduction, 2 * gradients + next * previous_gradients);
      previous_gradients = gradients;
    }
    if (is_stage3(s)) {
      const int64_t gathered = rounded(e.parameter * full);
      b.gathered = std::max(b.gathered, gathered + next * previous_gathered);
      previous_gathered = gathered;
    }
  }
  return b;
}

ShardingBytes expected_sharding_bytes(Sharding s, int world, const ShardingRun& run) {
  return expected_sharding_bytes(s, world, sharding_model_shape(run), sharding_state_bytes(run));
}

int64_t peak_above_held_floor(Sharding s, int world, const ShardingRun& run) {
  // Unsharded gradients (1 process, DDP, ZeRO-1) are freed by zero_grad and made again during
  // backward; ZeRO 2-3 hold one unit's full gradients, its staging and (stage 3) its gathered
  // parameters at once while that unit is reduce-scattered (reduction and gathered are both 0
  // for the others, and the gradients of ZeRO 2-3 are the shards'). With overlap the same is
  // alive at once when the largest unit's reduction starts (the peaks of the two columns may
  // come at other moments, so they do not add up).
  const Sharding alone = s == Sharding::Zero2Overlap   ? Sharding::Zero2
                         : s == Sharding::Zero3Overlap ? Sharding::Zero3
                                                       : s;
  const ShardingBytes expected = expected_sharding_bytes(alone, world, run);
  return std::max(expected.gradients, expected.reduction + expected.gathered);
}

double formula_bytes_per_parameter(Sharding s, int world, const StateBytes& e) {
  const double n = world;
  const auto p = static_cast<double>(e.parameter), g = static_cast<double>(e.gradient),
             k = static_cast<double>(e.optimizer());
  switch (s) {
    case Sharding::Single: return p + g + k;
    case Sharding::Ddp: return p + g + k + g;
    case Sharding::DdpBucketView: return p + g + k;
    case Sharding::Zero1: return p + g + k / n;
    case Sharding::Zero2:
    case Sharding::Zero2Overlap: return p + (g + k) / n;
    case Sharding::Zero3:
    case Sharding::Zero3Overlap: return (p + g + k) / n;
  }
  return 0;
}

int64_t expected_payload_per_step(Sharding s, int world, const ShardingRun& run) {
  if (s == Sharding::Single || world == 1) return 0;
  const int64_t n = world;
  const StateBytes e = sharding_state_bytes(run);
  int64_t bytes = 0;
  const std::vector<std::vector<int64_t>> units = sharding_model_shape(run).units;
  for (const std::vector<int64_t>& u : units) {
    const int64_t numel = sum_of(u);
    const int64_t piece = padded(numel, world) / n;  // ZeRO's shard of the padded unit
    switch (s) {
      case Sharding::Ddp:
      case Sharding::DdpBucketView:
        bytes += 2 * (n - 1) * e.gradient * numel / n;  // ring all-reduce of the gradients
        break;
      case Sharding::Zero1:  // all-reduce of the gradients, then all-gather of the parameters
        bytes += 2 * (n - 1) * e.gradient * piece + (n - 1) * e.parameter * piece;
        break;
      case Sharding::Zero2:  // reduce-scatter, then all-gather
      case Sharding::Zero2Overlap:
        bytes += (n - 1) * e.gradient * piece + (n - 1) * e.parameter * piece;
        break;
      case Sharding::Zero3:  // 2 all-gathers (1 for the last unit, kept for its backward), and
      case Sharding::Zero3Overlap:  // 1 reduce-scatter
        bytes += (&u == &units.back() ? 1 : 2) * (n - 1) * e.parameter * piece +
                 (n - 1) * e.gradient * piece;
        break;
      case Sharding::Single: break;
    }
  }
  return bytes;
}

RankMeasurement run_sharding_rank(Sharding s, const ShardingRun& run,
                                  const std::shared_ptr<ProcessGroup>& pg) {
  RankMeasurement m;
  m.rank = pg ? pg->rank() : 0;
  m.world = pg ? pg->size() : 1;
  if (run.batch % m.world != 0) {
    throw ValueError(fmt::format("[B22] a global batch of {} rows does not split into {} ranks "
                                 "evenly (each rank takes batch / N rows; choose N dividing {})",
                                 run.batch, m.world, run.batch),
                     "B22", "world", fmt::format("{}", m.world));
  }
  const int64_t rows = run.batch / m.world;
  Generator g(220);
  const Tensor x_all = randn({run.batch, run.inputs}, TensorOptions(kFloat32), &g).to(run.dtype);
  const Tensor y_all = randint(0, run.classes, {run.batch}, TensorOptions(kInt64), &g);
  const Tensor x = x_all.narrow(0, m.rank * rows, rows);
  const Tensor y = y_all.narrow(0, m.rank * rows, rows);
  const int64_t baseline = static_cast<int64_t>(memory_allocated(kCPU));

  std::shared_ptr<nn::Sequential> model = make_model(run);
  std::shared_ptr<distributed::DistributedDataParallel> ddp;
  std::shared_ptr<distributed::ZeroDataParallel> zero;
  nn::UnaryModule* net = model.get();
  std::vector<Tensor> trained = model->parameters();
  if (s == Sharding::Ddp || s == Sharding::DdpBucketView) {
    ddp = std::make_shared<distributed::DistributedDataParallel>(
        model, pg, distributed::DDPOptions{25.0, s == Sharding::DdpBucketView});
    net = ddp.get();
  } else if (s != Sharding::Single) {
    const int stage = s == Sharding::Zero1 ? 1 : is_stage3(s) ? 3 : 2;
    zero = std::make_shared<distributed::ZeroDataParallel>(
        model, pg, distributed::ZeroOptions{stage, overlaps(s)});
    net = zero.get();
    trained = zero->shard_parameters();
  }
  optim::Adam adam = make_optimizer(run, trained);

  for (int64_t step = 1; step <= run.steps; ++step) {
    const bool last = step == run.steps;
    const uint64_t wire_before = pg ? pg->wire_bytes_sent().value_or(0) : 0;
    int64_t held_before = 0;
    if (last) {
      if (zero) zero->reset_peaks();
      reset_peak_memory_stats(kCPU);
      held_before = static_cast<int64_t>(memory_allocated(kCPU));
    }
    Tensor loss;
    {
      // 16-bit parameters give 16-bit logits: the loss in float32.
      const Tensor logits = (*net)(x);
      loss = nn::cross_entropy(is_reduced_float(logits.dtype()) ? logits.to(kFloat32) : logits, y);
    }
    loss.backward();
    if (zero) {
      zero->step(adam);
    } else {
      adam.step();
    }
    Tensor value = loss.detach();
    loss = Tensor();
    if (last) {
      m.wire_bytes =
          pg ? static_cast<int64_t>(pg->wire_bytes_sent().value_or(0) - wire_before) : -1;
      m.held_measured = static_cast<int64_t>(memory_allocated(kCPU)) - baseline;
      // The loss (one 512-byte block) is all that is alive besides what the run keeps.
      m.held_measured -= storage_bytes(value);
      m.peak_above_held = static_cast<int64_t>(max_memory_allocated(kCPU)) - held_before;
      if (zero) {
        m.bytes.parameters = zero->parameter_nbytes();
        m.bytes.gradients = zero->gradient_nbytes();
        m.bytes.reduction = zero->reduction_peak_nbytes();
        m.bytes.gathered = zero->gathered_peak_nbytes();
      } else {
        m.bytes.parameters = static_cast<int64_t>(model->parameter_nbytes());
        for (const Tensor& p : model->parameters()) {
          const Tensor grad = p.grad();
          const bool in_bucket = ddp && s == Sharding::DdpBucketView;
          m.bytes.gradients += in_bucket ? 0 : storage_bytes(grad);
        }
        if (ddp) m.bytes.buckets = ddp->bucket_nbytes();
      }
      m.bytes.optimizer_state = static_cast<int64_t>(adam.state_nbytes());
    }
    if (pg) pg->all_reduce(value, distributed::ReduceOp::Avg);  // the global batch's mean loss
    m.losses.push_back(value.item<double>());
    if (zero) {
      zero->zero_grad();
    } else if (ddp) {
      ddp->zero_grad();
    } else {
      adam.zero_grad();
    }
  }
  return m;
}

std::string to_line(const RankMeasurement& m) {
  std::string line = fmt::format(
      "b22 rank={} world={} parameters={} gradients={} optimizer_state={} buckets={} "
      "reduction={} gathered={} held={} peak={} wire={} losses=",
      m.rank, m.world, m.bytes.parameters, m.bytes.gradients, m.bytes.optimizer_state,
      m.bytes.buckets, m.bytes.reduction, m.bytes.gathered, m.held_measured, m.peak_above_held,
      m.wire_bytes);
  for (size_t i = 0; i < m.losses.size(); ++i) {
    line += fmt::format("{}{:.17g}", i == 0 ? "" : ",", m.losses[i]);
  }
  return line;
}

std::optional<RankMeasurement> from_line(std::string_view text) {
  if (text.substr(0, 4) != "b22 ") return std::nullopt;
  RankMeasurement m;
  std::istringstream in{std::string(text.substr(4))};
  std::string field;
  int seen = 0;
  while (in >> field) {
    const size_t eq = field.find('=');
    if (eq == std::string::npos) return std::nullopt;
    const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
    if (key == "losses") {
      std::istringstream values(value);
      std::string v;
      while (std::getline(values, v, ',')) m.losses.push_back(std::strtod(v.c_str(), nullptr));
      ++seen;
      continue;
    }
    const int64_t v = std::strtoll(value.c_str(), nullptr, 10);
    if (key == "rank")
      m.rank = static_cast<int>(v);
    else if (key == "world")
      m.world = static_cast<int>(v);
    else if (key == "parameters")
      m.bytes.parameters = v;
    else if (key == "gradients")
      m.bytes.gradients = v;
    else if (key == "optimizer_state")
      m.bytes.optimizer_state = v;
    else if (key == "buckets")
      m.bytes.buckets = v;
    else if (key == "reduction")
      m.bytes.reduction = v;
    else if (key == "gathered")
      m.bytes.gathered = v;
    else if (key == "held")
      m.held_measured = v;
    else if (key == "peak")
      m.peak_above_held = v;
    else if (key == "wire")
      m.wire_bytes = v;
    else
      return std::nullopt;
    ++seen;
  }
  if (seen != 12) return std::nullopt;
  return m;
}

}  // namespace memgrad::examples

// ---- the program ----

#include <cstdio>

#include "distributed/error.h"
#include "distributed/spawn.h"
#include "examples/behaviours/behaviour.h"
#include "memgrad_build_config.h"

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B22", "tensor sharding: DDP and ZeRO stages 1-3 on N ranks", "seed 001 §9d",
    "Tensor sharding, as DeepSpeed or FairScale do it, splits the tensors of training across "
    "processes, so that each holds only a part of them."};

// Relative, against one process: the ranks sum their gradients in another order, in float32 or
// (master weights) in bfloat16, whose sums round at 2^-8.
constexpr double kLossTolerance = 1e-5;
constexpr double kMasterLossTolerance = 1e-3;

ShardingRun run_for_size(int64_t size, bool master = false) {
  ShardingRun run;
  run.hidden = 512 * size;
  if (master) {
    run.dtype = kBFloat16;
    run.master_weights = true;
  }
  return run;
}

// One rank of a configuration (started by spawn_ranks, or by ./memgrad launch with --worker).
int worker(const std::string& key, int64_t size, bool master) {
  const std::optional<Sharding> s = sharding_from_key(key);
  if (!s) {
    std::fprintf(stderr, "B22: unknown configuration '%s'\n", key.c_str());
    return 2;
  }
  try {
    auto pg = distributed::init_process_group(distributed::Backend::Gloo);
    const RankMeasurement m = run_sharding_rank(*s, run_for_size(size, master), pg);
    fmt::print("{}\n", to_line(m));
    return 0;
  } catch (const memgrad::Error& e) {
    std::fprintf(stderr, "B22 rank: error: %s\n", e.what());
    return 1;
  }
}

struct Config {
  Sharding sharding;
  int world;
  std::vector<RankMeasurement> ranks;  // indexed by rank
};

// Runs a configuration on `world` ranks of this program; throws with the ranks' output when
// one fails.
std::vector<RankMeasurement> launch(Sharding s, int world, int64_t size, bool master = false) {
  distributed::SpawnOptions options;
  options.env = {{"MEMGRAD_B22_WORKER", sharding_key(s)},
                 {"MEMGRAD_B22_SIZE", std::to_string(size)},
                 {"MEMGRAD_B22_MASTER", master ? "1" : "0"}};
  const distributed::SpawnResult result = distributed::spawn_ranks(world, options);
  std::vector<RankMeasurement> ranks(static_cast<size_t>(world));
  std::vector<bool> found(static_cast<size_t>(world), false);
  for (const distributed::RankOutcome& r : result.ranks) {
    std::istringstream lines(r.output);
    std::string line;
    while (std::getline(lines, line)) {
      if (auto m = from_line(line); m && m->rank == r.rank) {
        ranks[static_cast<size_t>(r.rank)] = *m;
        found[static_cast<size_t>(r.rank)] = true;
      }
    }
  }
  if (!result.ok() || std::find(found.begin(), found.end(), false) != found.end()) {
    std::string all;
    for (const distributed::RankOutcome& r : result.ranks) {
      all += fmt::format("\n[rank {}] {}", r.rank, r.output);
    }
    throw distributed::DistributedError(
        fmt::format("[B22] {} on {} ranks failed ({}):{}", sharding_title(s), world,
                    result.describe_failure(), all),
        "spawn", -1);
  }
  return ranks;
}

std::string bytes_cells(const ShardingBytes& b, int64_t held) {
  return fmt::format("{:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}", with_commas(b.parameters),
                     with_commas(b.gradients), with_commas(b.optimizer_state),
                     with_commas(b.buckets), with_commas(b.reduction), with_commas(b.gathered),
                     with_commas(held));
}

bool same_bytes(const ShardingBytes& a, const ShardingBytes& b) {
  return a.parameters == b.parameters && a.gradients == b.gradients &&
         a.optimizer_state == b.optimizer_state && a.buckets == b.buckets &&
         a.reduction == b.reduction && a.gathered == b.gathered;
}

std::string label(const Config& c) {
  return c.world == 1 ? std::string(sharding_title(c.sharding))
                      : fmt::format("{}, N={}", sharding_title(c.sharding), c.world);
}

// The master-weights table: per-rank model states (parameters, gradients, optimizer state) of
// DDP and ZeRO 1/2/3 at N = 2, 3 and 4, expected from the run's dtypes and optimizer, measured
// on every rank; the losses against one process. Returns whether everything matched.
bool print_master_weights(const ShardingRun& run, int64_t size) {
  const StateBytes e = sharding_state_bytes(run);
  const int64_t psi = sharding_parameter_count(run);
  fmt::print(
      "\nMaster weights: the same MLP with {} parameters and gradients, Adam keeping float32 "
      "master weights and state. Bytes per parameter read from the run: P = {} (parameter), "
      "G = {} (gradient), K = {} (optimizer: master {} + {} x {} state), P + G + K = {}. "
      "Model states one rank holds after step {}, expected vs measured (every rank):\n",
      dtype_name(run.dtype), e.parameter, e.gradient, e.optimizer(), e.master, e.state_tensors,
      e.state_element, e.total(), run.steps);
  fmt::print("{:<26} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}\n", "", "formula", "parameters",
             "gradients", "optimizer", "buckets", "held");
  std::vector<Config> configs;
  configs.push_back({Sharding::Single, 1, {run_sharding_rank(Sharding::Single, run, nullptr)}});
  for (int world : {2, 3, 4}) {
    for (Sharding s : {Sharding::Ddp, Sharding::Zero1, Sharding::Zero2, Sharding::Zero3}) {
      configs.push_back({s, world, launch(s, world, size, /*master=*/true)});
    }
  }
  bool all_match = true;
  const std::vector<double>& reference = configs[0].ranks[0].losses;
  double worst_loss = 0;
  for (const Config& c : configs) {
    const ShardingBytes x = expected_sharding_bytes(c.sharding, c.world, run);
    bool match = true;
    for (const RankMeasurement& m : c.ranks) {
      match = match && same_bytes(m.bytes, x) && m.held_measured == x.held();
      for (size_t k = 0; k < m.losses.size(); ++k) {
        worst_loss =
            std::max(worst_loss, std::abs(m.losses[k] - reference[k]) / std::abs(reference[k]));
      }
    }
    all_match = all_match && match;
    const auto formula = static_cast<int64_t>(std::llround(
        formula_bytes_per_parameter(c.sharding, c.world, e) * static_cast<double>(psi)));
    const RankMeasurement& r0 = c.ranks[0];
    fmt::print("{:<17} expected {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}\n", label(c),
               with_commas(formula), with_commas(x.parameters), with_commas(x.gradients),
               with_commas(x.optimizer_state), with_commas(x.buckets), with_commas(x.held()));
    fmt::print("{:<17} measured {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}  {}\n", "", "",
               with_commas(r0.bytes.parameters), with_commas(r0.bytes.gradients),
               with_commas(r0.bytes.optimizer_state), with_commas(r0.bytes.buckets),
               with_commas(r0.held_measured), match ? "yes" : "NO");
  }
  const bool losses_match = worst_loss <= kMasterLossTolerance;
  fmt::print(
      "Losses of every rank and configuration against 1 process (bfloat16 gradients summed in "
      "another order): largest relative difference {:.1e}, within {:g}: {}\n",
      worst_loss, kMasterLossTolerance, losses_match ? "yes" : "NO");
  return all_match && losses_match;
}

int body(const BehaviourFlags& flags) {
  if (!MEMGRAD_WITH_GLOO) {
    fmt::print(
        "skipped: the ranks exchange their bytes over Gloo, and this build has none (install "
        "libgloo-dev and configure the build again)\n");
    return kSkippedExitCode;
  }
  const ShardingRun run = run_for_size(flags.size);
  const int64_t psi = sharding_parameter_count(run);
  fmt::print(
      "MLP {}-{}-{}-{} ({} parameters, largest layer {}), Adam, float32, global batch {}, "
      "{} steps;\nN CPU ranks on this host over Gloo (loopback, a file store), each with "
      "batch / N rows.\n\n",
      run.inputs, run.hidden, run.hidden, run.classes, with_commas(psi),
      with_commas(sharding_largest_layer(run)), run.batch, run.steps);
  const StateBytes e = sharding_state_bytes(run);

  std::vector<Config> configs;
  configs.push_back({Sharding::Single, 1, {run_sharding_rank(Sharding::Single, run, nullptr)}});
  for (int world : {2, 4}) {
    for (Sharding s : {Sharding::Ddp, Sharding::DdpBucketView, Sharding::Zero1, Sharding::Zero2,
                       Sharding::Zero3, Sharding::Zero2Overlap, Sharding::Zero3Overlap}) {
      configs.push_back({s, world, launch(s, world, flags.size)});
    }
  }

  fmt::print(
      "Bytes one rank holds after step {} (as allocated; reduction and gathered are peaks "
      "during the step, not held after it). Expected from the shapes; measured: rank 0's "
      "tensors, and memory_allocated() for the held total; match: every rank, every "
      "column.\n",
      run.steps);
  fmt::print("{:<32} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}\n", "", "formula",
             "parameters", "gradients", "Adam state", "buckets", "reduction", "gathered", "held");
  bool all_match = true;
  for (const Config& c : configs) {
    const ShardingBytes expected = expected_sharding_bytes(c.sharding, c.world, run);
    bool match = true;
    for (const RankMeasurement& m : c.ranks) {
      match = match && same_bytes(m.bytes, expected) && m.held_measured == expected.held();
    }
    all_match = all_match && match;
    const auto formula = static_cast<int64_t>(std::llround(
        formula_bytes_per_parameter(c.sharding, c.world, e) * static_cast<double>(psi)));
    fmt::print("{:<22} expected {:>11} {}\n", label(c), with_commas(formula),
               bytes_cells(expected, expected.held()));
    fmt::print("{:<22} measured {:>11} {}  {}\n", "", "",
               bytes_cells(c.ranks[0].bytes, c.ranks[0].held_measured), match ? "yes" : "NO");
  }

  fmt::print(
      "\nPeak during step {} above what the rank held when it began (max_memory_allocated() "
      "less memory_allocated() at its start): at least the gradients backward makes again "
      "(unsharded) or, for ZeRO 2-3, reduction + gathered, which are alive at once while the "
      "largest unit is reduce-scattered; the rest is activations and temporaries. Match: every "
      "rank at least the floor.\n",
      run.steps);
  fmt::print("{:<22} {:>12} {:>12} {:>12}\n", "", "at least", "measured", "the rest");
  for (const Config& c : configs) {
    const int64_t floor = peak_above_held_floor(c.sharding, c.world, run);
    bool match = true;
    for (const RankMeasurement& m : c.ranks) match = match && m.peak_above_held >= floor;
    all_match = all_match && match;
    const int64_t measured = c.ranks[0].peak_above_held;
    fmt::print("{:<22} {:>12} {:>12} {:>12}  {}\n", label(c), with_commas(floor),
               with_commas(measured), with_commas(measured - floor), match ? "yes" : "NO");
  }

  fmt::print(
      "\nLoss of the global batch after each step (the same initial weights everywhere); "
      "the largest difference from 1 process must stay within {:g} (relative): the ranks "
      "add their gradients in another order.\n",
      kLossTolerance);
  const std::vector<double>& reference = configs[0].ranks[0].losses;
  bool losses_match = true;
  for (const Config& c : configs) {
    std::string cells;
    double worst = 0;
    for (size_t k = 0; k < c.ranks[0].losses.size(); ++k) {
      const double loss = c.ranks[0].losses[k];
      cells += fmt::format(" {:>10.7f}", loss);
      worst = std::max(worst, std::abs(loss - reference[k]) / std::abs(reference[k]));
    }
    losses_match = losses_match && worst <= kLossTolerance;
    fmt::print("{:<22}{}   {}\n", label(c), cells,
               c.world == 1 ? std::string("(reference)") : fmt::format("{:.1e}", worst));
  }

  fmt::print(
      "\nBytes rank 0 sent during step {}: expected, the data the collectives move; "
      "measured, the TCP payload written to its connections (Linux's tcpi_bytes_sent and "
      "tcpi_notsent_bytes), which adds "
      "Gloo's message headers and the call checks.\n",
      run.steps);
  fmt::print("{:<22} {:>12} {:>12} {:>12}\n", "", "expected", "measured", "overhead");
  for (const Config& c : configs) {
    if (c.world == 1) continue;
    const int64_t expected = expected_payload_per_step(c.sharding, c.world, run);
    const int64_t measured = c.ranks[0].wire_bytes;
    fmt::print("{:<22} {:>12} {:>12} {:>12}\n", label(c), with_commas(expected),
               with_commas(measured), with_commas(measured - expected));
  }

  const bool master_match = print_master_weights(run_for_size(flags.size, true), flags.size);

  const Config& single = configs[0];
  const Config* zero3 = nullptr;
  const Config* overlap = nullptr;
  const Config* ddp = nullptr;
  for (const Config& c : configs) {
    if (c.world == 4 && c.sharding == Sharding::Zero3) zero3 = &c;
    if (c.world == 4 && c.sharding == Sharding::Zero3Overlap) overlap = &c;
    if (c.world == 4 && c.sharding == Sharding::Ddp) ddp = &c;
  }
  const int64_t single_held = single.ranks[0].held_measured;
  print_conclusion(fmt::format(
      "sharding divides what each rank holds: ZeRO-3 on 4 ranks keeps {} per rank where one "
      "process keeps {} ({:.0f}%), and DDP keeps more than one process ({}: its buckets). What "
      "the per-parameter formulas leave out is memory too: ZeRO-3 gathers each layer while it "
      "runs ({} for the largest), and stages 2 and 3 hold a unit's full gradients and a staging "
      "buffer while they reduce ({}); overlapping the communication with the computation holds "
      "more (gathering the next layer and filling the next unit's gradients meanwhile: {} "
      "gathered and {} reducing at once), and the allocator's own peak shows it: during a ZeRO-3 "
      "step rank 0 rose {} above what it held. And sharding costs traffic: per step ZeRO-3 "
      "sent {} from rank 0 on 4 ranks, against {} for DDP.",
      human_bytes(zero3->ranks[0].held_measured), human_bytes(single_held),
      100.0 * static_cast<double>(zero3->ranks[0].held_measured) / static_cast<double>(single_held),
      human_bytes(ddp->ranks[0].held_measured), human_bytes(zero3->ranks[0].bytes.gathered),
      human_bytes(zero3->ranks[0].bytes.reduction), human_bytes(overlap->ranks[0].bytes.gathered),
      human_bytes(overlap->ranks[0].bytes.reduction), human_bytes(zero3->ranks[0].peak_above_held),
      human_bytes(zero3->ranks[0].wire_bytes), human_bytes(ddp->ranks[0].wire_bytes)));
  return all_match && losses_match && master_match ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b22_tensor_sharding_main() is its main() (a generated file calls it).
int b22_tensor_sharding_main(int argc, char** argv) {
  const char* worker_key = std::getenv("MEMGRAD_B22_WORKER");
  if (argc == 3 && std::string(argv[1]) == "--worker") worker_key = argv[2];
  if (worker_key != nullptr) {
    const char* size = std::getenv("MEMGRAD_B22_SIZE");
    const char* master = std::getenv("MEMGRAD_B22_MASTER");
    return worker(worker_key, size != nullptr ? std::strtoll(size, nullptr, 10) : 1,
                  master != nullptr && std::string(master) == "1");
  }
  return run_behaviour(argc, argv, kInfo, body);
}

}  // namespace memgrad::examples
