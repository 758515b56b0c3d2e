// DistributedDataParallel: data-parallel training with PyTorch's DDP semantics. Every rank holds
// the whole model, runs it on its own share of the batch, and after backward every rank holds
// the gradients of the whole batch (the average over ranks), so identical optimizer steps keep
// the replicas identical.
//
// How the gradients travel (PyTorch's Reducer):
//   - at construction, rank 0's parameters and buffers are broadcast to every rank;
//   - the parameters are grouped into buckets in reverse order of registration (backward produces
//     the last layers' gradients first): the first bucket closes once it holds
//     first_bucket_cap_mb MiB (1 MiB, PyTorch's), the others at bucket_cap_mb (25 MiB);
//   - a post-accumulate hook on every parameter copies its gradient, divided by the world size,
//     into its bucket as soon as backward has accumulated it (backward runs every AccumulateGrad
//     as soon as it is ready, autograd/accumulate_grad.cpp); when every gradient of a bucket has
//     arrived (and every earlier bucket has been started, so all ranks reduce the buckets in the
//     same order) the bucket's all-reduce (a sum: the shares are divided already) starts on the
//     process group's communication thread (all_reduce_async) and backward goes on computing the
//     next gradients meanwhile;
//   - when the last bucket has started (in the hook of the last gradient backward produces),
//     DDP waits for every bucket in order and copies the values back into the parameters'
//     .grad: backward returns with the whole batch's gradients, as in PyTorch.
// overlap = false reduces each bucket in the hook that completes it, blocking, on backward's
// thread. Left unset, DDP overlaps where the host has a core for the communication thread of
// every rank besides their compute threads (overlap_fits, below), and NCCL always: on fewer
// cores the communication thread takes turns with backward on the same cores, so there is no
// idle core to hide a collective behind, and the first bucket's separate, early all-reduce costs
// more than it hides (on 2 ranks of 1 thread on 2 cores: 8.0 to 8.5 ms a step overlapped against
// 6.7 to 7.1 ms blocking with the same two buckets; docs/performance.md).
// Memory:
//   buckets                 one flat tensor per bucket, allocated at construction and kept: as
//                           many bytes as the gradients (each bucket rounded as one allocation).
//                           A bucket in flight holds nothing more: the communication thread
//                           reduces it in place (Gloo's ring receives into a scratch chunk on
//                           the host heap, process_group.h), so the peaks are those of the
//                           blocking reduction, byte for byte.
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
#include <optional>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "engine/nn/module.h"

namespace memgrad::distributed {

struct DDPOptions {
  double bucket_cap_mb = 25.0;  // MiB per bucket, PyTorch's default
  bool gradient_as_bucket_view = false;
  // The first bucket's cap (the last layers' gradients, the first to arrive): small, so their
  // all-reduce starts early in backward. PyTorch's default (dist._DEFAULT_FIRST_BUCKET_BYTES).
  double first_bucket_cap_mb = 1.0;
  // Reduce buckets on the communication thread while backward goes on (true) or in the hook
  // that completes each, blocking (false); unset: as the host allows (overlap_fits).
  std::optional<bool> overlap = std::nullopt;
};

// Whether `cores` (the CPUs this process may run on) hold `local_ranks` ranks (those on this
// host), each with `threads_per_rank` compute threads and its communication thread: what DDP
// overlaps on when DDPOptions::overlap is unset (the Gloo backend).
bool overlap_fits(int64_t cores, int64_t local_ranks, int64_t threads_per_rank);
// The CPUs the calling thread may run on (its affinity): the `cores` DDP passes.
int64_t usable_cores();

// What one bucket holds (for reports and tests).
struct BucketInfo {
  std::vector<std::string> parameters;  // names, in the bucket's order
  int64_t numel = 0;
  int64_t allocated_nbytes = 0;  // as the allocator rounded the bucket
};

class DistributedDataParallel : public nn::UnaryModule {
 public:
  // Wraps `module` (its parameters: contiguous, on `pg`'s device, all requiring grad) and
  // broadcasts rank 0's parameters and buffers, then rank 0's bucket sizes, which every rank
  // checks against its own. Allocates: the buckets (the parameters' bytes, rounded per bucket),
  // and for the check one int64 per bucket, freed on return. Throws DistributedError for a
  // parameter on another device, and on a rank whose buckets differ from rank 0's.
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
  // Whether the buckets reduce on the communication thread (DDPOptions::overlap, as resolved at
  // construction).
  bool overlaps() const;
  // Buckets whose all-reduce has started since construction (in flight or done).
  uint64_t buckets_started() const;
  // Buckets all-reduced (waited for and copied back) since construction.
  uint64_t buckets_reduced() const;

  struct State;  // shared with the parameters' hooks, which outlive nothing they use

 private:
  // Throws DistributedError on a rank whose buckets differ from rank 0's (their all-reduces skip
  // the call check).
  void verify_buckets() const;

  std::shared_ptr<nn::UnaryModule> module_;
  std::shared_ptr<ProcessGroup> pg_;
  std::shared_ptr<State> state_;
};

}  // namespace memgrad::distributed
