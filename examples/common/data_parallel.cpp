// DataParallel: the training programs' --ddp and --zero.
#include "examples/common/data_parallel.h"

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/factories.h"
#include "examples/common/report.h"

namespace memgrad::examples {

DataParallel::DataParallel(std::shared_ptr<nn::UnaryModule> model, const TrainOptions& o,
                           Device device)
    : model_(std::move(model)), runner_(model_.get()) {
  if (!o.ddp && o.zero == 0 && !o.zero_overlap) return;
  if (o.ddp && o.zero != 0) throw ValueError("--ddp and --zero exclude each other", "", "--ddp");
  if (o.zero != 0 && (!o.save.empty() || !o.resume.empty())) {
    throw ValueError(fmt::format("--zero {} shards the parameters and the optimizer state: "
                                 "--save and --resume work with one process or --ddp",
                                 o.zero),
                     "", "--zero", fmt::format("{}", o.zero));
  }
  if (o.zero_overlap && o.zero < 2) {
    throw ValueError(fmt::format("--zero-overlap overlaps the reduce-scatters of --zero 2 and 3; "
                                 "got --zero {}",
                                 o.zero),
                     "", "--zero-overlap", fmt::format("{}", o.zero));
  }
  if (o.zero == 3 && o.checkpoint_segments > 0) {
    throw ValueError(
        "--zero 3 gathers each layer around its forward; with "
        "--checkpoint-segments the recomputation would gather again: not supported",
        "", "--zero", "3");
  }
  // A meta device stands for a GPU: its ranks allocate as NCCL's do unless --backend says gloo.
  const distributed::Backend backend = !o.backend.empty() ? distributed::parse_backend(o.backend)
                                       : device.is_cuda() || device.is_meta()
                                           ? distributed::Backend::Nccl
                                           : distributed::Backend::Gloo;
  pg_ = distributed::init_process_group(backend, device);
  if (o.batch_size % (o.accumulate * pg_->size()) != 0) {
    throw ValueError(fmt::format("--batch-size {} must split into {} ranks x --accumulate {} "
                                 "equal parts",
                                 o.batch_size, pg_->size(), o.accumulate),
                     "", "--batch-size", fmt::format("{}", o.batch_size));
  }
  if (o.ddp) {
    ddp_ = std::make_shared<distributed::DistributedDataParallel>(model_, pg_);
    runner_ = ddp_.get();
  } else {
    zero_ = std::make_shared<distributed::ZeroDataParallel>(
        model_, pg_, distributed::ZeroOptions{o.zero, o.zero_overlap});
    runner_ = zero_.get();
  }
}

std::string DataParallel::describe() const {
  if (!pg_) return "one process";
  const std::string mode =
      ddp_ ? "DDP"
           : fmt::format("ZeRO-{}{}", zero_->stage(), zero_->overlap() ? ", overlapping" : "");
  return fmt::format("{} on {} ranks ({})", mode, pg_->size(), backend_name(pg_->backend()));
}

std::string DataParallel::wrap_label() const {
  if (ddp_) return "DistributedDataParallel (+ gradient buckets)";
  if (!zero_) return "";
  return zero_->stage() == 3
             ? "ZeRO-3 (the parameters replaced by this rank's shards)"
             : fmt::format("ZeRO-{} (the parameters moved into padded flat units)", zero_->stage());
}

int64_t DataParallel::expected_kept_after_forward() const {
  if (!zero_ || zero_->stage() != 3) return 0;
  const std::vector<distributed::ZeroUnitInfo> units = zero_->units();
  const distributed::ZeroUnitInfo& last = units.front().name.empty() ? units.front() : units.back();
  return rounded(last.padded_numel *
                 static_cast<int64_t>(model_->parameters().front().element_size()));
}

int64_t DataParallel::kept_after_forward() const { return zero_ ? zero_->kept_nbytes() : 0; }

std::vector<Tensor> DataParallel::trainable() const {
  return zero_ ? zero_->shard_parameters() : model_->parameters();
}

Tensor DataParallel::rows(const Tensor& batch) const {
  if (!pg_) return batch;
  const int64_t n = batch.size(0) / pg_->size();
  return batch.narrow(0, pg_->rank() * n, n);
}

double DataParallel::mean(double local) const {
  if (!pg_) return local;
  Tensor t = full({1}, local, TensorOptions(kFloat64).with_device(pg_->device()));
  pg_->all_reduce(t, distributed::ReduceOp::Avg);
  return t.item_or(local);
}

std::unique_ptr<distributed::DistributedDataParallel::NoSyncGuard> DataParallel::no_sync() {
  if (!ddp_) return nullptr;
  return std::make_unique<distributed::DistributedDataParallel::NoSyncGuard>(*ddp_);
}

void DataParallel::step(optim::Optimizer& optimizer) {
  if (zero_) {
    zero_->step(optimizer);
  } else {
    optimizer.step();
  }
}

bool DataParallel::step(optim::Optimizer& optimizer, autograd::GradScaler& scaler) {
  if (zero_) return zero_->step([&] { return scaler.step(optimizer); });
  return scaler.step(optimizer);
}

autograd::GradScaler DataParallel::make_scaler(const Precision& precision) const {
  autograd::GradScalerOptions options{.enabled = precision.loss_scaling};
  if (pg_) {
    std::shared_ptr<distributed::ProcessGroup> pg = pg_;
    options.combine_found_inf = [pg](bool found) { return distributed::any_rank(*pg, found); };
  }
  return autograd::GradScaler(options);
}

void DataParallel::zero_grad(optim::Optimizer& optimizer) {
  optimizer.zero_grad();
  if (zero_) zero_->zero_grad();
}

}  // namespace memgrad::examples
