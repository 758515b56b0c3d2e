// DistributedDataParallel: bucket assignment, the gradient hooks, in-order bucket reduction.
#include "distributed/distributed_data_parallel.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <thread>

#include "allocator/trace.h"
#include "autograd/grad_mode.h"
#include "distributed/error.h"
#include "distributed/rendezvous_env.h"
#include "engine/elementwise.h"
#include "engine/factories.h"
#include "engine/memory.h"

namespace memgrad::distributed {

struct DistributedDataParallel::State {
  struct Param {
    std::string name;
    Tensor tensor;
    size_t bucket = 0;
    Tensor view;         // its piece of the bucket, shaped like the parameter
    bool ready = false;  // its gradient arrived in this backward
  };
  struct Bucket {
    Tensor flat;                 // the bucket's bytes
    std::vector<size_t> params;  // indices into `params`
    size_t pending = 0;          // gradients still to arrive in this backward
    std::shared_ptr<Work> work;  // its all-reduce, while in flight
  };

  std::shared_ptr<ProcessGroup> pg;
  DDPOptions options;
  bool overlap = true;  // options.overlap, resolved (overlap_for)
  std::vector<Param> params;
  std::vector<Bucket> buckets;
  size_t next_bucket = 0;    // the next bucket to start, in order
  bool sync_enabled = true;  // false inside no_sync()
  uint64_t started = 0;
  uint64_t reduced = 0;

  void prepare_backward() {
    for (Bucket& b : buckets) b.pending = b.params.size();
    for (Param& p : params) p.ready = false;
    next_bucket = 0;
  }

  void on_gradient(size_t index) {
    Param& p = params[index];
    if (!sync_enabled) return;  // no_sync: the gradient stays where autograd put it
    if (p.ready) {
      throw DistributedError(
          fmt::format("[DistributedDataParallel] parameter '{}' received a gradient twice in one "
                      "backward (used twice in forward?); each parameter may be used once",
                      p.name),
          "DistributedDataParallel", pg->rank());
    }
    p.ready = true;
    NoGradGuard no_grad;
    const Tensor grad = p.tensor.grad();
    const bool is_view =
        grad.defined() && grad.impl()->storage_ptr() == p.view.impl()->storage_ptr();
    // Divided by the world size on the way into the bucket (PyTorch's DDP does the same), so
    // the bucket is all-reduced as a plain sum and nothing is left to do once it arrives: the
    // division happens while backward goes on, not after the wait at its end.
    const double share = 1.0 / pg->size();
    if (is_view) {
      if (pg->size() > 1) p.view.mul_(share);
    } else {
      if (pg->size() > 1) {
        mul_out(p.view, grad, share);
      } else {
        p.view.copy_(grad);
      }
      // With views, the parameter's gradient becomes its piece of the bucket: the gradient
      // autograd allocated is freed here.
      if (options.gradient_as_bucket_view) p.tensor.set_grad(p.view);
    }
    Bucket& b = buckets[p.bucket];
    if (--b.pending > 0) return;
    while (next_bucket < buckets.size() && buckets[next_bucket].pending == 0) {
      start(buckets[next_bucket]);
      ++next_bucket;
    }
    if (next_bucket < buckets.size()) return;
    // The last bucket has started: backward is about done. Wait for every bucket, in order.
    for (Bucket& started_bucket : buckets) finish(started_bucket);
    prepare_backward();  // ready for the next backward
  }

  void start(Bucket& b) {
    ++started;
    // Unchecked: the constructor made sure every rank has these buckets.
    if (overlap) {
      b.work = pg->all_reduce_async(b.flat, ReduceOp::Sum, CallCheck::Skip);
      return;
    }
    pg->all_reduce(b.flat, ReduceOp::Sum, CallCheck::Skip);
    copy_back(b);
  }

  // Waits for a bucket in flight and copies it back (a blocking reduction did at start).
  void finish(Bucket& b) {
    if (b.work == nullptr) return;
    const std::shared_ptr<Work> work = std::move(b.work);
    work->wait();
    copy_back(b);
  }

  void copy_back(Bucket& b) {
    ++reduced;
    if (options.gradient_as_bucket_view) return;
    for (size_t i : b.params) {
      Tensor grad = params[i].tensor.grad();
      grad.copy_(params[i].view);
    }
  }

  // Names of the parameters whose gradient did not arrive in the last synchronised backward.
  std::vector<std::string> unreduced() const {
    std::vector<std::string> names;
    if (next_bucket == buckets.size()) return names;
    bool any_ready = false;
    for (const Param& p : params) any_ready = any_ready || p.ready;
    if (!any_ready) return names;  // no backward since the last forward
    for (const Param& p : params) {
      if (!p.ready) names.push_back(p.name);
    }
    return names;
  }
};

namespace {

// The ranks on this host: LOCAL_WORLD_SIZE where the launcher set it (spawn_ranks and torchrun
// do), else every rank of the group. A value outside [1, the group's size] is refused
// (DistributedError naming it).
int64_t local_ranks(const ProcessGroup& pg) {
  if (!env_string("LOCAL_WORLD_SIZE")) return pg.size();
  return env_int("LOCAL_WORLD_SIZE", 1, pg.size());
}

// DDPOptions::overlap as given, else as the host allows (NCCL's collectives are asynchronous
// already: its kernels run beside backward's on the GPU).
bool overlap_for(const DDPOptions& options, const ProcessGroup& pg) {
  if (options.overlap.has_value()) return *options.overlap;
  if (pg.backend() == Backend::Nccl) return true;
  return overlap_fits(usable_cores(), local_ranks(pg), omp_get_max_threads());
}

}  // namespace

bool overlap_fits(int64_t cores, int64_t local_ranks, int64_t threads_per_rank) {
  return cores >= local_ranks * (threads_per_rank + 1);
}

int64_t usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::UnaryModule> module,
                                                 std::shared_ptr<ProcessGroup> pg,
                                                 DDPOptions options)
    : module_(std::move(module)), pg_(std::move(pg)), state_(std::make_shared<State>()) {
  register_module("module", module_);
  for (const auto& [name, value] :
       {std::pair{"bucket_cap_mb", options.bucket_cap_mb},
        std::pair{"first_bucket_cap_mb", options.first_bucket_cap_mb}}) {
    if (!(value > 0)) {
      throw DistributedError(
          fmt::format("[DistributedDataParallel] {} must be positive, got {}", name, value),
          "DistributedDataParallel", pg_->rank());
    }
  }
  State& s = *state_;
  s.pg = pg_;
  s.options = options;
  s.overlap = overlap_for(options, *pg_);
  NoGradGuard no_grad;
  for (auto& [name, t] : module_->named_parameters()) {
    if (t.device() != pg_->device() || !t.is_contiguous() || !t.requires_grad()) {
      throw DistributedError(fmt::format("[DistributedDataParallel] parameter '{}' must be "
                                         "contiguous, require grad and live on {} (it is on {})",
                                         name, pg_->device().str(), t.device().str()),
                             "DistributedDataParallel", pg_->rank());
    }
    pg_->broadcast(t, 0);
    s.params.push_back({name, t, 0, Tensor(), false});
  }
  for (auto& [name, t] : module_->named_buffers()) pg_->broadcast(t, 0);

  // Buckets in reverse registration order, one dtype each, closed when they reach their cap
  // (the first bucket's, then bucket_cap_mb).
  const auto cap = static_cast<int64_t>(options.bucket_cap_mb * 1024 * 1024);
  const auto first_cap = static_cast<int64_t>(options.first_bucket_cap_mb * 1024 * 1024);
  std::vector<std::vector<size_t>> groups;
  int64_t bytes = 0;
  for (size_t k = s.params.size(); k-- > 0;) {
    const Tensor& t = s.params[k].tensor;
    if (groups.empty() || bytes >= (groups.size() == 1 ? first_cap : cap) ||
        s.params[groups.back().front()].tensor.dtype() != t.dtype()) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(k);
    bytes += static_cast<int64_t>(t.nbytes());
  }
  for (const std::vector<size_t>& group : groups) {
    State::Bucket b;
    int64_t numel = 0;
    for (size_t k : group) numel += s.params[k].tensor.numel();
    const DType dtype = s.params[group.front()].tensor.dtype();
    b.flat = zeros({numel}, TensorOptions(dtype).with_device(pg_->device()));
    name_in_trace(b.flat, intern_trace_string("(gradient buckets)"), "gradient");
    int64_t offset = 0;
    for (size_t k : group) {
      State::Param& p = s.params[k];
      p.bucket = s.buckets.size();
      p.view = b.flat.narrow(0, offset, p.tensor.numel()).view(p.tensor.sizes());
      offset += p.tensor.numel();
    }
    b.params = group;
    s.buckets.push_back(std::move(b));
  }
  verify_buckets();
  s.prepare_backward();
  std::weak_ptr<State> weak = state_;
  for (size_t k = 0; k < s.params.size(); ++k) {
    s.params[k].tensor.register_post_accumulate_grad_hook([weak, k](const Tensor&) {
      if (auto state = weak.lock()) state->on_gradient(k);  // a no-op once DDP is gone
    });
  }
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::verify_buckets() const {
  // The parameters' broadcasts checked their dtypes and sizes across ranks, in order; the buckets
  // depend on the options too.
  std::vector<int64_t> numels;
  for (const State::Bucket& b : state_->buckets) numels.push_back(b.flat.numel());
  check_same_layout(*pg_, numels, "DistributedDataParallel", "gradient buckets");
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  State& s = *state_;
  if (s.sync_enabled) {
    const std::vector<std::string> missing = s.unreduced();
    if (!missing.empty()) {
      throw DistributedError(
          fmt::format("[DistributedDataParallel] Expected to have finished reduction in the "
                      "prior iteration before starting a new one: parameters that received no "
                      "gradient: {} (every parameter must take part in the loss)",
                      fmt::join(missing, ", ")),
          "DistributedDataParallel", pg_->rank());
    }
  }
  if (s.sync_enabled) s.prepare_backward();
  return (*module_)(x);
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp)
    : ddp_(ddp), previous_(ddp.state_->sync_enabled) {
  ddp_.state_->sync_enabled = false;
}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() { ddp_.state_->sync_enabled = previous_; }

void DistributedDataParallel::zero_grad() {
  if (!state_->options.gradient_as_bucket_view) {
    module_->zero_grad(/*set_to_none=*/true);
    return;
  }
  NoGradGuard no_grad;
  for (State::Bucket& b : state_->buckets) b.flat.zero_();
  for (State::Param& p : state_->params) {
    const Tensor g = p.tensor.grad();
    if (g.defined() && g.impl()->storage_ptr() != p.view.impl()->storage_ptr()) {
      p.tensor.set_grad(Tensor());  // a gradient that is not a view yet (no_sync, set_to_none)
    }
  }
}

std::vector<BucketInfo> DistributedDataParallel::buckets() const {
  std::vector<BucketInfo> out;
  for (const State::Bucket& b : state_->buckets) {
    BucketInfo info;
    for (size_t k : b.params) info.parameters.push_back(state_->params[k].name);
    info.numel = b.flat.numel();
    info.allocated_nbytes = static_cast<int64_t>(b.flat.impl()->storage().allocated_nbytes());
    out.push_back(std::move(info));
  }
  return out;
}

int64_t DistributedDataParallel::bucket_nbytes() const {
  int64_t total = 0;
  for (const BucketInfo& b : buckets()) total += b.allocated_nbytes;
  return total;
}

bool DistributedDataParallel::overlaps() const { return state_->overlap; }

uint64_t DistributedDataParallel::buckets_started() const { return state_->started; }

uint64_t DistributedDataParallel::buckets_reduced() const { return state_->reduced; }

}  // namespace memgrad::distributed
