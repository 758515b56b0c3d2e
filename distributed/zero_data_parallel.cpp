// ZeroDataParallel: units, flat parameters, shards, and the hooks that gather and reduce.
#include "distributed/zero_data_parallel.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "distributed/error.h"
#include "engine/factories.h"
#include "engine/memory.h"

namespace memgrad::distributed {
namespace {

// A tensor over `flat`'s storage at `offset` (elements) with `sizes`, contiguous: an alias that
// is not a view in autograd's sense (no base), as FSDP's parameters over its flat vector.
Tensor alias(const Tensor& flat, int64_t offset, const Shape& sizes) {
  return Tensor(std::make_shared<TensorImpl>(flat.impl()->storage_ptr(), sizes,
                                             contiguous_strides(sizes),
                                             flat.storage_offset() + offset, flat.dtype()));
}

int64_t allocated_nbytes(const Tensor& t) {
  return t.defined() ? static_cast<int64_t>(t.impl()->storage().allocated_nbytes()) : 0;
}

}  // namespace

struct ZeroDataParallel::State {
  struct Unit {
    std::string name;
    nn::UnaryModule* module = nullptr;
    std::vector<Tensor> params;
    std::vector<std::string> names;
    std::vector<Shape> shapes;     // each parameter's (stage 3's hold 0 elements between uses)
    std::vector<int64_t> offsets;  // of each parameter in the flat vector, in elements
    int64_t numel = 0, padded = 0, shard = 0;
    Tensor flat_param;  // stages 1-2: the whole (padded) parameters; stage 3: while gathered
    std::shared_ptr<Work> gathering;  // stage 3: a prefetch in flight into flat_param
    Tensor shard_param;               // this rank's piece: a leaf the optimizer updates
    Tensor flat_grad;    // stage 1: kept until zero_grad; stages 2-3: while the unit is reduced
    size_t pending = 0;  // gradients still to arrive in this backward
    std::vector<bool> ready;
    std::vector<uint64_t> hook_ids;
  };

  std::shared_ptr<ProcessGroup> pg;
  int stage = 1;
  bool overlap = false;
  // Stage 3: the units in the order this forward gathered them, and the previous forward's
  // order (which forward prefetch follows).
  std::vector<size_t> order, last_order;
  // Stage 3: the unit whose forward ended last, still gathered: its backward comes first, right
  // after the loss, so it is not freed and gathered again (FSDP2 does not reshard its root after
  // forward for the same reason). The next unit's forward, its own reduction or step() frees it.
  std::optional<size_t> kept;
  // Stages 2-3 with overlap: the unit being reduce-scattered on the communication thread (at
  // most one), its piece, and its staging bytes.
  struct Reduction {
    size_t unit = 0;
    Tensor piece;
    std::shared_ptr<Work> work;
    int64_t staging = 0;
  };
  std::optional<Reduction> reducing;
  size_t reduced_in_backward = 0;  // units whose reduction started in this backward
  std::vector<Unit> units;
  std::vector<Tensor> shards;
  Tensor placeholder;  // what stage 3's parameters hold between uses: 0 elements, 0 bytes
  int64_t gathered_now = 0, gathered_peak = 0;
  // Stages 2-3: the bytes of the units' full gradients and of the staging buffers alive now.
  int64_t reduction_now = 0, reduction_peak = 0;

  // The unit's module path in the trace (that of its module, "" for the root).
  static const char* unit_path(const Unit& u) {
    return u.module != nullptr ? u.module->trace_path() : "";
  }

  Tensor view_of(const Unit& u, size_t i, const Tensor& flat) const {
    return alias(flat, u.offsets[i], u.shapes[i]);
  }

  // Stage 3: the unit's parameters from every rank's shard, into a fresh flat vector; a
  // prefetch of them in flight is waited for instead.
  void gather(Unit& u) {
    if (u.gathering != nullptr) {
      finish_gather(u);
      return;
    }
    if (u.flat_param.defined()) return;
    start_gather(u, false);
    point_at_gathered(u);
  }

  // Stage 3, overlap on: starts gathering unit `k` on the communication thread, unless it is
  // gathered or on its way already. The flat vector is allocated (and counted as gathered) now.
  void prefetch_unit(size_t k) {
    Unit& u = units[k];
    if (u.flat_param.defined()) return;
    start_gather(u, true);
  }

  void start_gather(Unit& u, bool async) {
    NoGradGuard no_grad;
    u.flat_param =
        empty({u.padded}, TensorOptions(u.shard_param.dtype()).with_device(pg->device()));
    name_in_trace(u.flat_param, unit_path(u), "parameter");
    // The collectives were checked at construction.
    if (async) {
      u.gathering = pg->all_gather_async(u.flat_param, u.shard_param, CallCheck::Skip);
    } else {
      pg->all_gather(u.flat_param, u.shard_param, CallCheck::Skip);
    }
    gathered_now += allocated_nbytes(u.flat_param);
    gathered_peak = std::max(gathered_peak, gathered_now);
  }

  void finish_gather(Unit& u) {
    const std::shared_ptr<Work> work = std::exchange(u.gathering, nullptr);
    work->wait();
    point_at_gathered(u);
  }

  void point_at_gathered(Unit& u) {
    for (size_t i = 0; i < u.params.size(); ++i) {
      u.params[i].impl()->set_data(*view_of(u, i, u.flat_param).impl());
    }
  }

  // Stage 3: the parameters let go of the gathered vector, which is freed (after its prefetch,
  // if one is in flight).
  void release(Unit& u) {
    if (kept && &units[*kept] == &u) kept.reset();
    if (u.gathering != nullptr) finish_gather(u);
    if (!u.flat_param.defined()) return;
    for (Tensor& p : u.params) p.impl()->set_data(*placeholder.impl());
    gathered_now -= allocated_nbytes(u.flat_param);
    u.flat_param = Tensor();
  }

  // Stage 3, before unit k's forward: its parameters, then (prefetch) the next unit's in the
  // previous forward's order.
  void before_forward(size_t k) {
    if (kept && *kept != k) release(units[*kept]);
    kept.reset();
    gather(units[k]);
    if (!overlap) return;
    // A unit met again: a new forward that did not come through the wrapper.
    if (std::find(order.begin(), order.end(), k) != order.end()) start_forward();
    order.push_back(k);
    const auto at = std::find(last_order.begin(), last_order.end(), k);
    if (at != last_order.end() && at + 1 != last_order.end()) prefetch_unit(*(at + 1));
  }

  // Stage 3, before unit k's backward: its parameters, then (prefetch) those of the unit before
  // it in this forward, whose backward comes next.
  void before_backward(size_t k) {
    gather(units[k]);
    if (!overlap) return;
    const auto at = std::find(order.rbegin(), order.rend(), k);
    if (at != order.rend() && at + 1 != order.rend()) prefetch_unit(*(at + 1));
  }

  // Stage 3, after unit k's forward: its parameters stay gathered while no other unit's forward
  // follows (then it is the last, and its backward the first); the unit kept before is freed.
  void keep(size_t k) {
    if (kept && *kept != k) release(units[*kept]);
    kept = k;
  }

  // A new forward through the wrapper: the order it gathers in starts again.
  void start_forward() {
    if (!order.empty()) last_order = std::exchange(order, {});
  }

  void prepare_backward() {
    settle_reduction();
    reduced_in_backward = 0;
    for (Unit& u : units) {
      u.pending = u.params.size();
      std::fill(u.ready.begin(), u.ready.end(), false);
    }
  }

  void on_gradient(size_t unit, size_t index) {
    Unit& u = units[unit];
    // Its last reduction still in flight (a backward that did not reduce every unit, then
    // another): done before its full gradients are written again.
    if (reducing && reducing->unit == unit) settle_reduction();
    if (u.ready[index]) {
      throw DistributedError(
          fmt::format("[ZeroDataParallel] parameter '{}' received a gradient twice in one "
                      "backward (used twice in forward?); each parameter may be used once",
                      u.names[index]),
          "ZeroDataParallel", pg->rank());
    }
    u.ready[index] = true;
    NoGradGuard no_grad;
    Tensor& param = u.params[index];
    if (!u.flat_grad.defined()) {
      u.flat_grad = zeros({u.padded}, TensorOptions(param.dtype()).with_device(pg->device()));
      name_in_trace(u.flat_grad, unit_path(u), "gradient");
      if (stage > 1) count_reduction(allocated_nbytes(u.flat_grad));
    }
    Tensor view = view_of(u, index, u.flat_grad);
    const Tensor grad = param.grad();
    if (grad.impl()->storage_ptr() != u.flat_grad.impl()->storage_ptr()) view.copy_(grad);
    // Stage 1 keeps the gradient as a view of the flat one; stages 2-3 free it now.
    param.set_grad(stage == 1 ? view : Tensor());
    if (--u.pending > 0) return;
    u.pending = u.params.size();  // ready for the next backward
    std::fill(u.ready.begin(), u.ready.end(), false);
    if (stage == 1) {
      pg->all_reduce(u.flat_grad, ReduceOp::Avg, CallCheck::Skip);
      return;
    }
    reduce_scatter(unit);
    if (stage == 3) release(u);
    // The last unit of this backward: its reduction is waited for by the last gradient's hook.
    if (++reduced_in_backward == units.size()) {
      settle_reduction();
      reduced_in_backward = 0;
    }
  }

  void count_reduction(int64_t nbytes) {
    reduction_now += nbytes;
    reduction_peak = std::max(reduction_peak, reduction_now);
  }

  // Stages 2-3: this rank's piece of unit k's averaged gradients, for its shard's .grad; the
  // unit's full gradients are freed once it is there. With overlap the reduce-scatter runs on the
  // communication thread, after the one in flight is done (one at a time: two units' full
  // gradients at most, the next one's filling while the last reduces).
  void reduce_scatter(size_t k) {
    Unit& u = units[k];
    if (overlap) settle_reduction();
    Tensor piece = empty({u.shard}, TensorOptions(u.flat_grad.dtype()).with_device(pg->device()));
    pg->reset_staging_peak();
    if (overlap) {
      std::shared_ptr<Work> work =
          pg->reduce_scatter_async(piece, u.flat_grad, ReduceOp::Avg, CallCheck::Skip);
      const int64_t staging = pg->staging_peak_nbytes();
      count_reduction(staging);
      reducing = Reduction{k, std::move(piece), std::move(work), staging};
      return;
    }
    pg->reduce_scatter(piece, u.flat_grad, ReduceOp::Avg, CallCheck::Skip);
    reduction_peak = std::max(reduction_peak, reduction_now + pg->staging_peak_nbytes());
    take_piece(u, piece);
  }

  // Waits for the reduction in flight, if any, and gives its unit's shard the piece.
  void settle_reduction() {
    if (!reducing) return;
    Reduction r = std::move(*reducing);
    reducing.reset();
    r.work->wait();  // frees the staging buffer
    reduction_now -= r.staging;
    take_piece(units[r.unit], r.piece);
  }

  void take_piece(Unit& u, const Tensor& piece) {
    reduction_now -= allocated_nbytes(u.flat_grad);
    u.flat_grad = Tensor();
    Tensor shard_grad = u.shard_param.grad();
    if (shard_grad.defined()) {
      shard_grad.add_(piece);
    } else {
      u.shard_param.set_grad(piece);
    }
  }
};

ZeroDataParallel::ZeroDataParallel(std::shared_ptr<nn::UnaryModule> module,
                                   std::shared_ptr<ProcessGroup> pg, ZeroOptions options)
    : module_(std::move(module)), pg_(std::move(pg)), state_(std::make_shared<State>()) {
  register_module("module", module_);
  State& s = *state_;
  s.pg = pg_;
  s.stage = options.stage;
  s.overlap = options.overlap;
  const int rank = pg_->rank();
  if (s.stage < 1 || s.stage > 3) {
    throw DistributedError(fmt::format("[ZeroDataParallel] ZeRO stage {} does not exist (1, 2 or "
                                       "3)",
                                       s.stage),
                           "ZeroDataParallel", rank);
  }
  NoGradGuard no_grad;
  // Units: the modules with parameters of their own, root first, then depth first.
  std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> modules = {{"", module_}};
  for (size_t m = 0; m < modules.size(); ++m) {
    const auto [prefix, mod] = modules[m];
    std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> children;
    for (const auto& [child, ptr] : mod->named_children()) {
      children.emplace_back(prefix.empty() ? child : prefix + "." + child, ptr);
    }
    modules.insert(modules.begin() + static_cast<std::ptrdiff_t>(m) + 1, children.begin(),
                   children.end());
    const auto own = mod->named_parameters(/*recurse=*/false);
    if (own.empty()) continue;
    State::Unit u;
    u.name = prefix;
    u.module = dynamic_cast<nn::UnaryModule*>(mod.get());
    if (u.module == nullptr && s.stage == 3) {
      throw DistributedError(fmt::format("[ZeroDataParallel] stage 3 gathers each unit around its "
                                         "forward: '{}' ({}) must be a UnaryModule",
                                         prefix, mod->name()),
                             "ZeroDataParallel", rank);
    }
    for (const auto& [name, t] : own) {
      if (t.device() != pg_->device() || !t.requires_grad() || t.dtype() != own[0].second.dtype()) {
        throw DistributedError(fmt::format("[ZeroDataParallel] parameter '{}' must require grad, "
                                           "share its unit's dtype and live on {}",
                                           name, pg_->device().str()),
                               "ZeroDataParallel", rank);
      }
      pg_->broadcast(t, 0);
      u.params.push_back(t);
      u.names.push_back(prefix.empty() ? name : prefix + "." + name);
      u.shapes.push_back(t.sizes());
      u.offsets.push_back(u.numel);
      u.numel += t.numel();
    }
    const int64_t n = pg_->size();
    u.padded = (u.numel + n - 1) / n * n;
    u.shard = u.padded / n;
    u.ready.assign(u.params.size(), false);
    s.units.push_back(std::move(u));
  }
  // The units' collectives skip the call check: every rank must have rank 0's units.
  std::vector<int64_t> padded;
  for (const State::Unit& u : s.units) padded.push_back(u.padded);
  check_same_layout(*pg_, padded, "ZeroDataParallel", "units");
  for (State::Unit& u : s.units) {
    const DType dtype = u.params[0].dtype();
    Tensor flat = zeros({u.padded}, TensorOptions(dtype).with_device(pg_->device()));
    for (size_t i = 0; i < u.params.size(); ++i) {
      Tensor view = s.view_of(u, i, flat);
      view.copy_(u.params[i]);
    }
    if (s.stage < 3) {
      for (size_t i = 0; i < u.params.size(); ++i) {
        u.params[i].impl()->set_data(*s.view_of(u, i, flat).impl());
      }
      u.flat_param = flat;
      u.shard_param = alias(flat, rank * u.shard, {u.shard});
    } else {
      u.shard_param = flat.narrow(0, rank * u.shard, u.shard).clone();
      if (!s.placeholder.defined())
        s.placeholder = empty({0}, TensorOptions(dtype).with_device(pg_->device()));
      for (Tensor& p : u.params) p.impl()->set_data(*s.placeholder.impl());
    }
    u.shard_param.requires_grad_(true);
    name_in_trace(u.shard_param, s.unit_path(u), "parameter");
    s.shards.push_back(u.shard_param);
  }
  // Ready for the first backward, also when the forward bypasses this wrapper (the units' own
  // hooks still run): each unit resets itself once all its gradients are in.
  s.prepare_backward();

  std::weak_ptr<State> weak = state_;
  for (size_t k = 0; k < s.units.size(); ++k) {
    State::Unit& u = s.units[k];
    for (size_t i = 0; i < u.params.size(); ++i) {
      u.params[i].register_post_accumulate_grad_hook([weak, k, i](const Tensor&) {
        if (auto state = weak.lock()) state->on_gradient(k, i);
      });
    }
    if (s.stage != 3) continue;
    u.hook_ids.push_back(
        u.module->register_forward_pre_hook([weak, k](nn::UnaryModule&, const Tensor&) {
          if (auto state = weak.lock()) state->before_forward(k);
        }));
    u.hook_ids.push_back(u.module->register_forward_hook(
        [weak, k](nn::UnaryModule&, const Tensor&, const Tensor& output) {
          auto state = weak.lock();
          if (!state) return;
          if (!is_grad_enabled() || !output.requires_grad()) {
            state->release(state->units[k]);
            return;
          }
          // Just before the unit's backward: its parameters again (still there if its forward
          // was the last).
          output.register_hook([weak, k](const Tensor&) {
            if (auto st = weak.lock()) st->before_backward(k);
            return Tensor();
          });
          state->keep(k);
        }));
  }
}

ZeroDataParallel::~ZeroDataParallel() {
  for (State::Unit& u : state_->units) {
    for (uint64_t id : u.hook_ids) u.module->remove_forward_hook(id);
  }
}

Tensor ZeroDataParallel::forward(const Tensor& x) {
  state_->prepare_backward();
  state_->start_forward();
  return (*module_)(x);
}

const std::vector<Tensor>& ZeroDataParallel::shard_parameters() const { return state_->shards; }

void ZeroDataParallel::step(optim::Optimizer& optimizer) {
  step([&optimizer] {
    optimizer.step();
    return true;
  });
}

bool ZeroDataParallel::step(const std::function<bool()>& update) {
  State& s = *state_;
  NoGradGuard no_grad;
  // A backward whose units were not all used ends here; a unit still gathered (a prefetch whose
  // unit had no backward, or a unit whose gradients did not all arrive) must not read or keep
  // the shards the optimizer is about to change.
  s.settle_reduction();
  if (s.stage == 3) {
    for (State::Unit& u : s.units) s.release(u);
  }
  if (s.stage == 1) {
    for (State::Unit& u : s.units) {
      if (u.flat_grad.defined()) {
        u.shard_param.set_grad(alias(u.flat_grad, pg_->rank() * u.shard, {u.shard}));
      }
    }
  }
  if (!update()) return false;
  if (s.stage == 3) return true;
  for (State::Unit& u : s.units) pg_->all_gather(u.flat_param, u.shard_param, CallCheck::Skip);
  return true;
}

void ZeroDataParallel::zero_grad() {
  state_->settle_reduction();
  state_->reduction_now = 0;
  for (State::Unit& u : state_->units) {
    u.flat_grad = Tensor();
    u.shard_param.set_grad(Tensor());
    for (Tensor& p : u.params) p.set_grad(Tensor());
  }
}

int ZeroDataParallel::stage() const { return state_->stage; }
bool ZeroDataParallel::overlap() const { return state_->overlap; }

std::vector<ZeroUnitInfo> ZeroDataParallel::units() const {
  std::vector<ZeroUnitInfo> out;
  for (const State::Unit& u : state_->units) out.push_back({u.name, u.numel, u.padded, u.shard});
  return out;
}

int64_t ZeroDataParallel::parameter_nbytes() const {
  int64_t total = 0;
  for (const State::Unit& u : state_->units) {
    total += allocated_nbytes(state_->stage == 3 ? u.shard_param : u.flat_param);
  }
  return total;
}

int64_t ZeroDataParallel::gradient_nbytes() const {
  state_->settle_reduction();
  int64_t total = 0;
  for (const State::Unit& u : state_->units) {
    total +=
        state_->stage == 1 ? allocated_nbytes(u.flat_grad) : allocated_nbytes(u.shard_param.grad());
  }
  return total;
}

int64_t ZeroDataParallel::gathered_peak_nbytes() const { return state_->gathered_peak; }

int64_t ZeroDataParallel::kept_nbytes() const {
  const State& s = *state_;
  return s.kept ? allocated_nbytes(s.units[*s.kept].flat_param) : 0;
}

int64_t ZeroDataParallel::reduction_peak_nbytes() const { return state_->reduction_peak; }

void ZeroDataParallel::reset_peaks() {
  state_->gathered_peak = state_->gathered_now;
  state_->reduction_peak = state_->reduction_now;
}

}  // namespace memgrad::distributed
