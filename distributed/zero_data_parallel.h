// ZeroDataParallel: data parallelism that shards what DDP replicates, as DeepSpeed's ZeRO and
// PyTorch's FSDP do. The model is cut into units: every module that holds parameters of its own
// (a Linear, a LayerNorm, an Embedding). A unit's parameters are laid end to end in one flat
// vector, padded to a multiple of the world size N, and rank r owns piece r of it (its shard).
//
//   stage 1  shards the optimizer state. Every rank keeps the whole flat parameters and
//            gradients; after backward (each unit's gradients all-reduced and averaged as soon as
//            they are all there) each rank steps only its shard, then an all_gather of every
//            unit's flat parameters brings the updated pieces to every rank.
//            Per parameter: 4 B (parameters) + 4 B (gradients) + 8/N B (Adam's two moments).
//   stage 2  also shards the gradients. During backward, as soon as a unit's gradients are all
//            there, they are reduce-scattered: each rank keeps the average of its piece and the
//            full gradients of that unit are freed, unit by unit. Then step and all_gather as in
//            stage 1. Per parameter: 4 + 12/N B.
//   stage 3  also shards the parameters (FSDP's FULL_SHARD). Between uses each parameter is an
//            empty tensor; a unit's parameters are all-gathered just before its forward and
//            freed when the next unit's forward starts, gathered again just before its backward
//            (a hook on the unit's output gradient) and freed once its gradients are
//            reduce-scattered. The unit whose forward ends last is thus still gathered when its
//            backward, the first, starts: one all_gather fewer per step (FSDP2 keeps its root's
//            parameters after forward for the same reason). Under no_grad a unit is freed
//            right after its forward.
//            Per parameter: 16/N B, plus the largest unit gathered while it runs (with
//            overlap, the largest two consecutive units: the next is gathered meanwhile).
//
// What the per-parameter formulas leave out, and this class measures: the padding of each unit
// to a multiple of N, the allocator's rounding, the gathered parameters of stage 3, and the
// buffers of the reduction in stages 2 and 3 (a unit's full gradients, and the reduce-scatter's
// staging buffer of the same size), which exist only while a unit is being reduced.
//
// Collectives: the constructor broadcasts rank 0's parameters and then its units' sizes, which
// every rank compares with its own (check_same_layout); the units' all_gathers, reduce_scatters
// and all_reduces then skip the call check (CallCheck::Skip), one round trip each fewer.
//
// Use: build the optimizer over shard_parameters(), then per step forward, backward, step(opt),
// zero_grad(). The units must be called through operator() (Sequential and memgrad's modules
// do), so that stage 3's forward hooks run; the wrapped module itself may be called directly
// (the work is done by the units' hooks and the gradient hooks). Each parameter may be used once
// per forward.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "engine/nn/module.h"
#include "engine/optim/optimizer.h"

namespace memgrad::distributed {

struct ZeroOptions {
  int stage = 1;  // 1, 2 or 3
  // Communication overlapping computation, on the group's communication thread (DeepSpeed's
  // overlap_comm, FSDP's prefetching). Stages 2-3: a unit's reduce-scatter runs while backward
  // computes the units before it, one at a time (the next unit's waits for it), so two units'
  // full gradients can be alive at once (the one reducing, with its staging, and the next one
  // filling). Stage 3 also gathers the next unit's parameters while the current one computes:
  // in forward the unit after it in the previous forward's order (FSDP's forward_prefetch), in
  // backward the unit before it in this forward (FSDP's BACKWARD_PRE): two units are gathered at
  // once. The last gradient's hook waits for the last reduction; when a backward leaves a unit
  // without gradients, step(), zero_grad(), gradient_nbytes() or the next forward does. On NCCL
  // (asynchronous on the GPU already) and in a group of one the collectives run at once, and the
  // extra memory is held all the same. Stage 1: no effect. Off by default, which holds the least.
  bool overlap = false;
};

// One unit, for reports and tests.
struct ZeroUnitInfo {
  std::string name;          // the module's dotted name ("" for the root)
  int64_t numel = 0;         // its parameters' elements
  int64_t padded_numel = 0;  // rounded up to a multiple of N
  int64_t shard_numel = 0;   // padded_numel / N: what each rank owns
};

class ZeroDataParallel : public nn::UnaryModule {
 public:
  // Broadcasts rank 0's parameters, flattens each unit and keeps this rank's pieces.
  // Allocates: stages 1 and 2 each unit's flat parameters (padded) in place of its parameters;
  // stage 3 only this rank's shard of each unit (the parameters are freed). Throws
  // DistributedError for a stage other than 1-3, a unit that is not a UnaryModule (stage 3), or
  // a parameter not on pg's device.
  ZeroDataParallel(std::shared_ptr<nn::UnaryModule> module, std::shared_ptr<ProcessGroup> pg,
                   ZeroOptions options);
  ~ZeroDataParallel() override;

  // The wrapped module's forward (stage 3 gathers each unit around its own forward).
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "ZeroDataParallel"; }

  // This rank's shard of each unit: leaves requiring grad, what the optimizer must update.
  const std::vector<Tensor>& shard_parameters() const;
  // Gives each shard its gradient (its piece of the averaged gradients), runs optimizer.step(),
  // then (stages 1 and 2) all-gathers every unit's parameters. Allocates: what the optimizer
  // allocates (its state lazily, for the shards only).
  void step(optim::Optimizer& optimizer);
  // The same with `update` in place of optimizer.step() (a GradScaler's step over the shards'
  // optimizer, which may skip): the all_gather follows only when it returns true. Returns what
  // `update` returned.
  bool step(const std::function<bool()>& update);
  // Frees the gradients: the shards' and (stage 1) the flat ones the parameters' .grad view.
  void zero_grad();

  int stage() const;
  bool overlap() const;
  std::vector<ZeroUnitInfo> units() const;
  // Bytes held now, as allocated: the parameters (stages 1-2: the flat vectors; stage 3: the
  // shards) and the gradients (stage 1: the flat ones; stages 2-3: the shards').
  int64_t parameter_nbytes() const;
  int64_t gradient_nbytes() const;
  // Peaks since construction or the last reset_peaks(), as allocated: the gathered parameters
  // of stage 3 held at once, and the reduction buffers of stages 2-3 alive at once (a unit's
  // full gradients plus the reduce-scatter's staging; with overlap also the next unit's full
  // gradients, filling meanwhile).
  int64_t gathered_peak_nbytes() const;
  // Stage 3: the bytes of the unit still gathered after its forward (the last one's, for its
  // backward), as allocated; 0 when none is (other stages, under no_grad, after backward).
  int64_t kept_nbytes() const;
  int64_t reduction_peak_nbytes() const;
  void reset_peaks();

  struct State;

 private:
  std::shared_ptr<nn::UnaryModule> module_;
  std::shared_ptr<ProcessGroup> pg_;
  std::shared_ptr<State> state_;
};

}  // namespace memgrad::distributed
