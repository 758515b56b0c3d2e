// ProcessGroup: collectives across processes (ranks), with PyTorch's names and semantics
// (torch.distributed), over existing engines only: Gloo for CPU tensors, NCCL for CUDA tensors.
//
// Every collective works on contiguous tensors of the same dtype and element count on every rank,
// and checks it: before any data moves, the ranks exchange a description of their call (op,
// dtype, element count, root; 40 bytes each, through the transport, no device memory on Gloo), so
// a rank that called something else makes every rank throw CollectiveMismatchError instead of
// waiting forever. A rank whose own checks reject its arguments (a tensor on another device, not
// contiguous, of a dtype or shape the collective cannot take) takes part in that exchange all the
// same, saying so, and then sends its error's text (at most 1 KiB, a second exchange made only
// then): it throws its own typed error (DeviceError, ValueError, DTypeError, ShapeError) and
// every other rank a CollectiveMismatchError naming it and quoting that error, at once.
// A peer whose process exits closes its connections: the others throw RankFailureError naming it
// at once, and a peer that stays silent makes them throw when the group's timeout
// (MEMGRAD_DIST_TIMEOUT, default 60 s) runs out. After either failure the group is unusable
// (every later call throws the same error), as in PyTorch.
//
// Memory: each collective says what it allocates. Outputs are the caller's tensors (allocated
// by the caller, as in PyTorch's all_gather_into_tensor and reduce_scatter_tensor), and every
// staging buffer memgrad allocates comes from the device's allocator, so it shows in
// memory_allocated() while the collective runs. On Gloo the ring all-reduce receives each step's
// chunk (nbytes / N) into a scratch buffer on the host heap (GlooRing, freed on return), and NCCL
// keeps its channels' buffers (cudaMalloc, per communicator): those bytes are the one thing a
// collective uses that memgrad's statistics do not see. On NCCL the call check goes through two
// small device tensors (one 512-byte block each, freed on return), since NCCL moves device memory
// only. A group of one rank on Gloo needs no engine: its collectives are local copies or nothing.
// On NCCL even a group of one runs every collective (and its call check) through NCCL. Collectives
// are not recorded by autograd. Each completes before it returns, except all_reduce_async,
// reduce_scatter_async and all_gather_async, which run on the group's communication thread (one per
// group, started by the first such call) and return a Work to wait on: data-parallel training
// reduces a bucket of gradients while backward computes the next (DistributedDataParallel), and
// ZeRO-3 gathers the next unit's parameters while the current one computes. The collectives keep
// one order on every rank: a blocking collective first waits for the ones in flight.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "distributed/store.h"
#include "engine/device.h"
#include "engine/tensor.h"

namespace memgrad::distributed {

namespace detail {
class Transport;
}

enum class Backend { Gloo, Nccl };

// "gloo" / "nccl".
std::string_view backend_name(Backend backend);
// Parses "gloo" or "nccl". Throws DistributedError for anything else.
Backend parse_backend(std::string_view name);

// Whether a collective exchanges and compares the ranks' calls first (the class comment).
// Skip is for a caller that has made sure every rank makes the same calls, as DDP does at
// construction for its buckets and ZeRO for its units: it saves one round trip per call (about 0.1
// ms on loopback when idle, more when the cores are busy), and a mismatch is no longer named: it
// fails as Gloo does (an error or the timeout).
enum class CallCheck { Exchange, Skip };

// Sum: element-wise sum over ranks. Avg: the sum divided by the number of ranks (the average
// data-parallel training needs; Gloo has no average, so it is the sum, then a division in place).
enum class ReduceOp { Sum, Avg };

// A collective in flight (ProcessGroup::all_reduce_async), PyTorch's Work.
class Work {
 public:
  // Blocks until the collective is done on this rank, then finishes it on the calling thread
  // (the division of an average, the tensor's version bump; once). Throws what the collective
  // threw (RankFailureError, CollectiveMismatchError), on every call.
  void wait();
  // Whether the communication thread is done with it (wait() then returns at once).
  bool is_completed() const;

 private:
  friend class ProcessGroup;
  void complete(std::exception_ptr error);  // on the communication thread

  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::function<void()> finish_;  // run by the first wait() that finds it done without error
};

struct ProcessGroupOptions {
  // How long a collective (and the rendezvous) waits for a peer.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
};

class ProcessGroup {
 public:
  // Use init_process_group.
  ProcessGroup(Backend backend, int rank, int size, Device device,
               std::unique_ptr<detail::Transport> transport, ProcessGroupOptions options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  Backend backend() const { return backend_; }
  // Where the group's tensors live: cpu for Gloo, cuda:LOCAL_RANK for NCCL.
  Device device() const { return device_; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }

  // Reduces `tensor` over all ranks, in place: every rank ends with the sum (or average).
  // Allocates: nothing (Gloo's ring: a scratch chunk of nbytes / N on the host heap, see above).
  // Version: bumps tensor's. Sends per rank: 2 (N - 1) / N x nbytes (ring).
  void all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum,
                  CallCheck check = CallCheck::Exchange);
  // The same, started on the group's communication thread: it returns at once, the tensor's
  // bytes must stay as they are until Work::wait() returns (which then divides an average and
  // bumps the version, on the waiting thread). Arguments are checked here; a rejected call, a
  // group of one and NCCL (whose kernels are asynchronous already) run at once and return a
  // completed Work. Allocates: nothing (the communication thread's stack, once per group).
  std::shared_ptr<Work> all_reduce_async(const Tensor& tensor, ReduceOp op = ReduceOp::Sum,
                                         CallCheck check = CallCheck::Exchange);
  // Waits for every collective in flight (finishing each as Work::wait() does); every blocking
  // collective calls it first. Throws the first error one of them threw.
  void wait_in_flight();

  // input (N x k elements) is reduced over ranks and rank r receives elements [r k, (r + 1) k) of
  // the result in `output` (k elements): PyTorch's reduce_scatter_tensor. Allocates: on Gloo one
  // staging buffer of input's nbytes (the N pieces every rank sends this one, gathered by an
  // all-to-all, then summed in rank order into output), freed before it returns; on NCCL nothing.
  // Version: bumps output's. Sends per rank: (N - 1) / N x input's nbytes.
  void reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum,
                      CallCheck check = CallCheck::Exchange);
  // The same, started on the communication thread as all_reduce_async is: output holds the
  // result once Work::wait() returns (which sums the staging rows into it, divides an average,
  // and frees the staging buffer), and input's bytes must stay as they are until then. ZeRO 2-3
  // reduce a unit's gradients with it while backward computes the next. Allocates: on Gloo the
  // staging buffer, here, on the calling thread (so the allocator sees the caller's order);
  // a group of one and NCCL run at once, as reduce_scatter.
  std::shared_ptr<Work> reduce_scatter_async(const Tensor& output, const Tensor& input,
                                             ReduceOp op = ReduceOp::Sum,
                                             CallCheck check = CallCheck::Exchange);

  // Concatenates every rank's `input` (k elements) into `output` (N x k), in rank order:
  // PyTorch's all_gather_into_tensor. When input is exactly this rank's piece of output (a view
  // at offset rank x k) it runs in place. Allocates: nothing. Version: bumps output's.
  // Sends per rank: (N - 1) x input's nbytes (ring).
  void all_gather(const Tensor& output, const Tensor& input, CallCheck check = CallCheck::Exchange);
  // The same, started on the communication thread as all_reduce_async is: output's bytes are
  // the gathered ones once Work::wait() returns (which bumps its version), and input's must stay
  // as they are until then. ZeRO-3 prefetches the next unit's parameters with it. Allocates:
  // nothing (the caller allocated output).
  std::shared_ptr<Work> all_gather_async(const Tensor& output, const Tensor& input,
                                         CallCheck check = CallCheck::Exchange);

  // Copies `tensor` of rank `src` into `tensor` of every rank. Allocates: nothing.
  // Version: bumps tensor's. Sends: N - 1 copies of nbytes in all, along a binomial tree rooted
  // at src (src sends ceil(log2 N) of them).
  void broadcast(const Tensor& tensor, int src);

  // Returns when every rank has called it. Allocates: nothing.
  void barrier();

  // Collectives run so far (the sequence number of the last one started).
  uint64_t collectives_run() const { return sequence_.load(); }
  // The most staging bytes one collective has held at once since the last reset_staging_peak()
  // (as allocated: reduce_scatter's buffer on Gloo; 0 for the others).
  int64_t staging_peak_nbytes() const { return staging_peak_; }
  void reset_staging_peak() { staging_peak_ = 0; }
  // Bytes this process has sent to its peers since the group was made, measured by the kernel:
  // the TCP payload of the group's connections (Linux's tcpi_bytes_sent less retransmissions,
  // plus what still waits in the send queue when a collective returns: tcpi_notsent_bytes), so
  // it includes Gloo's 48-byte message headers and memgrad's call check besides the tensors'
  // bytes. Empty where it cannot be measured (NCCL, which moves data over NVLink/PCIe/IB).
  std::optional<uint64_t> wire_bytes_sent() const;

 private:
  // What one call looks like to its peers (exchanged and compared before the data moves).
  struct Call {
    int64_t op = 0;
    int64_t dtype = 0;
    int64_t numel = 0;
    int64_t extra = -1;  // broadcast's root, all_gather/reduce_scatter's input numel
  };
  // Counts the call, exchanges and compares the calls of every rank; throws the group's failure
  // again when it is broken. `rejected`: the error this rank's own argument checks threw (null:
  // none), shared with the other ranks, then thrown here.
  // With CallCheck::Skip it only counts the call (a rejected one throws here, on this rank).
  void begin(const char* op, const Call& call, const std::exception_ptr& rejected,
             CallCheck check = CallCheck::Exchange);
  // The transport's exchange; a transport failure breaks the group (fail), and a rank that
  // rejected its arguments throws its own error even then.
  std::vector<int64_t> exchange_calls(const char* op, const std::vector<int64_t>& mine,
                                      const std::exception_ptr& rejected);
  [[noreturn]] void fail(const char* op, const std::string& transport_message);
  void check_tensor(const char* op, const char* what, const Tensor& t) const;
  // all_reduce's argument checks: the call to exchange, or the error they threw (`rejected`).
  Call all_reduce_call(const Tensor& tensor, ReduceOp op, std::exception_ptr& rejected) const;
  // The division of an average and the version bump, after the data moved.
  void finish_all_reduce(const Tensor& tensor, ReduceOp op) const;
  // reduce_scatter's argument checks; its staging buffer (Gloo: N pieces, counted in the staging
  // peak), the all-to-all into it (after begin()), and the sum of its rows into output.
  Call reduce_scatter_call(const Tensor& output, const Tensor& input, ReduceOp op,
                           std::exception_ptr& rejected) const;
  Tensor reduce_scatter_staging(const Tensor& output, const Tensor& input);
  void move_reduce_scatter(const Tensor& staging, const Tensor& input);
  void finish_reduce_scatter(const Tensor& output, const Tensor& staging, ReduceOp op) const;
  // all_gather's argument checks, and its data movement (after begin()).
  Call all_gather_call(const Tensor& output, const Tensor& input,
                       std::exception_ptr& rejected) const;
  void move_all_gather(const Tensor& output, const Tensor& input);
  // Whether an async collective runs at once instead (a rejected call, a group of one, NCCL),
  // returning a Work that is done already.
  bool runs_at_once(const std::exception_ptr& rejected) const;
  static std::shared_ptr<Work> completed_work();
  // Queues `job` on the communication thread (started on first use); `finish` runs on the thread
  // that waits for the returned Work.
  std::shared_ptr<Work> start_async(std::function<void()> job, std::function<void()> finish);

  class Worker;  // the communication thread (process_group.cpp)

  Backend backend_;
  int rank_;
  int size_;
  Device device_;
  std::unique_ptr<detail::Transport> transport_;
  ProcessGroupOptions options_;
  // Touched by one thread at a time (the blocking collectives wait for those in flight), but
  // read by collectives_run() from any.
  std::atomic<uint64_t> sequence_ = 0;
  int64_t staging_peak_ = 0;
  std::exception_ptr failure_;  // set once a collective failed: thrown again by every call
  std::vector<std::shared_ptr<Work>> in_flight_;  // started by all_reduce_async, not waited for
  std::unique_ptr<Worker> worker_;                // last: joined first, while the rest lives
};

// Joins `world_size` ranks through `store` (needed when world_size > 1) and returns the group.
// Where its tensors live, `device`: for Gloo cpu (the default) or sim:N, host memory either way;
// for NCCL cuda:`local_rank` (compiled in the CUDA build only). Blocks until every rank has
// joined; throws RankFailureError naming the ranks that did not join within options.timeout,
// DistributedError for a bad argument or a backend this build lacks.
// On a meta device (meta:N) the rank runs alone: no store, no peers, no waiting. Every collective
// allocates on the device what `backend` allocates for it (NCCL's call-check tensors, Gloo's
// reduce-scatter staging) and moves nothing, so a data-parallel run's per-rank memory can be
// estimated one rank at a time (docs/estimate.md); PyTorch's counterpart is its fake process
// group. Allocates: nothing on the device (Gloo's connections are host memory).
std::shared_ptr<ProcessGroup> init_process_group(Backend backend, int rank, int world_size,
                                                 std::optional<Store> store,
                                                 ProcessGroupOptions options = {},
                                                 int local_rank = -1,
                                                 std::optional<Device> device = std::nullopt);

// The same from the environment, as torchrun sets it: RANK, WORLD_SIZE, LOCAL_RANK, and the store
// of Store::from_env() (not needed for one rank, nor on a meta device); MEMGRAD_DIST_TIMEOUT sets
// the timeout.
std::shared_ptr<ProcessGroup> init_process_group(Backend backend,
                                                 std::optional<Device> device = std::nullopt);

// Checks that every rank has rank 0's `layout` (sizes a caller derived from its arguments, such as
// DDP's buckets or ZeRO's units), before collectives on them skip the call check: rank 0's goes
// to every rank in a checked broadcast (a layout of another length is a CollectiveMismatchError on
// every rank), and a rank whose layout differs throws DistributedError naming `what` and both
// layouts, from `who`. Allocates: the layout on pg's device (int64), freed on return; on a meta
// device that and nothing more (no values to compare).
void check_same_layout(ProcessGroup& pg, const std::vector<int64_t>& layout, const char* who,
                       const char* what);

// Whether `flag` is true on any rank of `pg`: a collective every rank must call (a
// GradScaler's combine_found_inf, so that ranks holding different shards skip a step together).
// Allocates: one float32 element on pg's device, freed on return. On a meta device there are no
// values: this rank's own flag.
bool any_rank(ProcessGroup& pg, bool flag);

}  // namespace memgrad::distributed
