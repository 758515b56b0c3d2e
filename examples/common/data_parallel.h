// --ddp and --zero 1|2|3 for the training programs, run under ./memgrad launch: the process group
// from the environment (gloo for cpu, nccl for cuda:LOCAL_RANK), the wrapped model, this rank's
// rows of each batch, and the optimizer step of each mode.
//
//   ./memgrad launch -n 2 -- train_mlp --ddp --epochs 1
//   ./memgrad launch -n 4 -- train_charlm --zero 3 --steps 100
//
// Every rank reads the whole batch (the same shuffling on every rank) and keeps rows
// [r B / N, (r + 1) B / N): the global batch is --batch-size, as in one process.
#pragma once

#include <memory>
#include <vector>

#include "autograd/grad_scaler.h"
#include "distributed/distributed_data_parallel.h"
#include "distributed/zero_data_parallel.h"
#include "engine/nn/module.h"
#include "engine/optim/optimizer.h"
#include "examples/common/train_options.h"

namespace memgrad::examples {

class DataParallel {
 public:
  // Without --ddp or --zero: one process, `model` itself. Otherwise joins the process group of
  // the environment and wraps the model. Throws ValueError for flags that do not combine
  // (--zero with --save or --resume; --zero 3 with --checkpoint-segments; a batch that
  // does not split into N x --accumulate equal parts), DistributedError without the launch
  // environment.
  DataParallel(std::shared_ptr<nn::UnaryModule> model, const TrainOptions& options, Device device);

  bool enabled() const { return pg_ != nullptr; }
  int rank() const { return pg_ ? pg_->rank() : 0; }
  int world() const { return pg_ ? pg_->size() : 1; }
  // Rank 0 prints progress and reports; the others stay quiet.
  bool prints() const { return rank() == 0; }
  // "DDP on 2 ranks (gloo)" / "ZeRO-3 on 4 ranks (gloo)" / "one process".
  std::string describe() const;
  // The report row of what wrapping the model allocated: "DistributedDataParallel (+ gradient
  // buckets)" or "ZeRO-3 (the parameters replaced by this rank's shards)".
  std::string wrap_label() const;

  // ZeRO-3 keeps the parameters of the unit whose forward ends last gathered for its backward:
  // their bytes expected from the units' sizes (that unit is the root when it holds parameters
  // of its own, otherwise the last unit: the models here run their modules in the order they
  // register them), and as measured. 0 for one process, DDP and ZeRO 1-2.
  int64_t expected_kept_after_forward() const;
  int64_t kept_after_forward() const;

  // What to call for the forward pass.
  nn::UnaryModule& module() { return *runner_; }
  // What the optimizer updates: the parameters, or this rank's ZeRO shards.
  std::vector<Tensor> trainable() const;
  // This rank's rows of a batch (a view; allocates nothing).
  Tensor rows(const Tensor& batch) const;
  // The mean of `local` over ranks (one all_reduce of a scalar).
  double mean(double local) const;
  // No communication in the backward passes while it lives (DDP, accumulation); null otherwise.
  std::unique_ptr<distributed::DistributedDataParallel::NoSyncGuard> no_sync();

  // The optimizer step (ZeRO: on the shards, then the all_gather) and zero_grad.
  void step(optim::Optimizer& optimizer);
  // The step through `scaler` (which may skip it on an inf/NaN gradient; ZeRO gathers only when
  // it stepped). Returns whether it stepped.
  bool step(optim::Optimizer& optimizer, autograd::GradScaler& scaler);
  // The GradScaler for `precision` (disabled without loss scaling). With ranks its inf/NaN
  // decision is collective (distributed::any_rank): each rank checks the gradients it holds (a
  // ZeRO shard) and all skip together.
  autograd::GradScaler make_scaler(const Precision& precision) const;
  void zero_grad(optim::Optimizer& optimizer);

 private:
  std::shared_ptr<nn::UnaryModule> model_;
  std::shared_ptr<distributed::ProcessGroup> pg_;
  std::shared_ptr<distributed::DistributedDataParallel> ddp_;
  std::shared_ptr<distributed::ZeroDataParallel> zero_;
  nn::UnaryModule* runner_;
};

}  // namespace memgrad::examples
