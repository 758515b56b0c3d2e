// DistributedDataParallel: data-parallel training with PyTorch's DDP semantics. Every rank holds
// the whole model, runs it on its own share of the batch, and after backward every rank holds
// the gradients of the whole batch (the average over ranks), so identical optimizer steps keep
// the replicas identical.
//
// How the gradients travel (PyTorch's Reducer):
//   - at construction, rank 0's parameters and buffers are broadcast to every rank;
//   - the parameters are grouped into buckets of at most bucket_cap_mb MiB, in reverse order of
//     registration (backward produces the last layers' gradients first);
//   - a post-accumulate hook on every parameter copies its gradient into its bucket as soon as
//     backward has accumulated it; when every gradient of a bucket has arrived (and every earlier
//     bucket has been reduced, so all ranks reduce the buckets in the same order) the bucket is
//     all-reduced and averaged, during the backward pass;
//   - the averaged values are copied back into the parameters' .grad.
// memgrad's collectives complete before they return, so a bucket's all-reduce runs inside
// backward but does not overlap the computation of the next gradients, as PyTorch's
// asynchronous one does. PyTorch also caps its first bucket at 1 MiB; memgrad does not.
//
// Memory:
//   buckets                 one flat tensor per bucket, allocated at construction and kept: as
//                           many bytes as the gradients (each bucket rounded as one allocation).
//   gradient_as_bucket_view the parameters' .grad become views into the buckets (after the first
//                           backward, which copies each gradient in and frees it): the gradients
//                           and the buckets are then the same bytes, one gradient-sized copy
//                           less. zero_grad() then fills the buckets with zeros rather than
//                           freeing them (a set_to_none would cost a copy per gradient at the
//                           next backward, as in PyTorch).
//   no_sync()               backward passes inside it skip the communication: gradients
//                           accumulate locally (in .grad, or in the buckets with views) until a
//                           backward outside it reduces the sum. (PyTorch decides at forward
//                           time; memgrad when the gradients arrive, so a forward that bypasses
//                           the wrapper still behaves.)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "engine/nn/module.h"

namespace memgrad::distributed {

struct DDPOptions {
  double bucket_cap_mb = 25.0;  // MiB per bucket, PyTorch's default
  bool gradient_as_bucket_view = false;
};

// What one bucket holds (for reports and tests).
struct BucketInfo {
  std::vector<std::string> parameters;  // names, in the bucket's order
  int64_t numel = 0;
  int64_t allocated_nbytes = 0;  // as the allocator rounded the bucket
};

class DistributedDataParallel : public nn::UnaryModule {
 public:
  // Wraps `module` (its parameters: contiguous, on `pg`'s device, all requiring grad) and
  // broadcasts rank 0's parameters and buffers. Allocates: the buckets (the parameters' bytes,
  // rounded per bucket). Throws DistributedError for a parameter on another device.
  DistributedDataParallel(std::shared_ptr<nn::UnaryModule> module, std::shared_ptr<ProcessGroup> pg,
                          DDPOptions options = {});
  ~DistributedDataParallel() override;

  // The wrapped module's forward. Throws DistributedError when the previous backward did not
  // reduce every bucket (a parameter received no gradient: PyTorch's "Expected to have finished
  // reduction in the prior iteration" error, naming the parameters).
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "DistributedDataParallel"; }

  nn::UnaryModule& module() { return *module_; }
  const ProcessGroup& process_group() const { return *pg_; }

  // While the returned guard lives, forward/backward pairs do not communicate.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  // Frees the gradients (set_to_none), or, with gradient_as_bucket_view, zeroes the buckets the
  // gradients view. Allocates nothing.
  void zero_grad();

  std::vector<BucketInfo> buckets() const;
  // The buckets' bytes as allocated (what they add to memory_allocated()).
  int64_t bucket_nbytes() const;
  // Buckets all-reduced since construction.
  uint64_t buckets_reduced() const;

  struct State;  // shared with the parameters' hooks, which outlive nothing they use

 private:
  std::shared_ptr<nn::UnaryModule> module_;
  std::shared_ptr<ProcessGroup> pg_;
  std::shared_ptr<State> state_;
};

}  // namespace memgrad::distributed
