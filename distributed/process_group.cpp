// ProcessGroup: argument checks, the call check, staging, and failures as typed errors.
//
// The call check: before the data of collective #k moves, every rank contributes five integers
// (k, op, dtype, numel, extra) to an all-gather and compares the table with rank 0's row. All ranks
// see the same table, so either all go on or all throw the same CollectiveMismatchError; a rank
// that calls something else can never leave the others waiting for data that will not come.
// A rank whose own argument checks fail (a tensor on the wrong device, not contiguous, of the
// wrong dtype or shape) still takes part in the call check: its row says "rejected" (the op
// negated, the length of its error's text in place of numel), and a second all-gather, which
// only happens when some row says so, carries the texts. That rank then throws its own error,
// the others a CollectiveMismatchError naming it and quoting its error.
#include "distributed/process_group.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/grad_mode.h"
#include "distributed/error.h"
#include "distributed/failure_note.h"
#include "distributed/gloo_transport.h"
#include "distributed/meta_transport.h"
#include "distributed/nccl_transport.h"
#include "distributed/rendezvous_env.h"
#include "engine/cuda.h"
#include "engine/error.h"
#include "engine/factories.h"
#include "engine/views.h"
#include "memgrad_build_config.h"

namespace memgrad::distributed {
namespace {

enum OpCode : int64_t { kAllReduce = 1, kReduceScatter, kAllGather, kBroadcast, kBarrier };

const char* op_code_name(int64_t code) {
  switch (code) {
    case kAllReduce: return "all_reduce";
    case kReduceScatter: return "reduce_scatter";
    case kAllGather: return "all_gather";
    case kBroadcast: return "broadcast";
    case kBarrier: return "barrier";
    default: return "an unknown collective";
  }
}

constexpr size_t kCallFields = 5;  // sequence, op, dtype, numel, extra
// The most bytes of a rejecting rank's error text its peers receive (the rest is cut).
constexpr size_t kMaxReasonBytes = 1024;

// `text` in int64 words (zero-padded), `words` long, for the transport's exchange.
std::vector<int64_t> pack_text(const std::string& text, size_t words) {
  std::vector<int64_t> packed(words, 0);
  std::memcpy(packed.data(), text.data(), std::min(text.size(), words * sizeof(int64_t)));
  return packed;
}

std::string describe_call(const int64_t* f) {
  if (f[1] == kBarrier) return "barrier";
  std::string s =
      fmt::format("{} {} numel {}", op_code_name(f[1]), dtype_name(static_cast<DType>(f[2])), f[3]);
  if (f[1] == kBroadcast) s += fmt::format(" from rank {}", f[4]);
  if (f[1] == kAllGather || f[1] == kReduceScatter) s += fmt::format(" (input numel {})", f[4]);
  return s;
}

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

// The state letter of process `pid` of this host in /proc/PID/stat (R running, S sleeping, T
// stopped, Z zombie, ...), 'X' when it is gone, '?' when it cannot be read.
char process_state(int64_t pid) {
  if (pid <= 0) return '?';
  if (kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH ? 'X' : '?';
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return 'X';
  const size_t close = line.rfind(')');  // the state follows the command name in parentheses
  if (close == std::string::npos || close + 2 >= line.size()) return '?';
  return line[close + 2];
}

// The peers of `peers` that have exited, those stopped (by SIGSTOP, a terminal or a debugger: alive
// but never reaching a collective), and those that cannot be checked from here.
struct Diagnosis {
  std::vector<int> gone;
  std::vector<int> stopped;
  std::vector<int> elsewhere;  // on another host
};

Diagnosis diagnose(const std::vector<detail::PeerInfo>& peers, int rank) {
  Diagnosis d;
  const std::string host = this_host();
  for (size_t r = 0; r < peers.size(); ++r) {
    if (static_cast<int>(r) == rank) continue;
    if (peers[r].host != host) {
      d.elsewhere.push_back(static_cast<int>(r));
      continue;
    }
    const char state = process_state(peers[r].pid);
    if (state == 'Z' || state == 'X') d.gone.push_back(static_cast<int>(r));
    if (state == 'T' || state == 't') d.stopped.push_back(static_cast<int>(r));
  }
  return d;
}

// Sets this rank's key "<prefix>/<what>/<rank>" to `value` and waits for every rank's. Throws
// RankFailureError naming the ranks whose keys did not appear within `timeout` ("<ranks>
// <did_not>").
void meet(Store& store, const std::string& prefix, const char* what, const std::string& value,
          const char* did_not, int rank, int size, std::chrono::milliseconds timeout) {
  auto key = [&](int r) { return fmt::format("{}/{}/{}", prefix, what, r); };
  store.set(key(rank), value);
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(key(r));
  if (store.wait(keys, timeout)) return;
  std::vector<int> missing;
  for (int r = 0; r < size; ++r) {
    if (!store.wait({key(r)}, std::chrono::milliseconds(1))) missing.push_back(r);
  }
  throw RankFailureError(fmt::format("[init_process_group] rank {}: rank{} {} {} within {} ms ({}; "
                                     "MEMGRAD_DIST_TIMEOUT sets the timeout)",
                                     rank, missing.size() == 1 ? "" : "s", fmt::join(missing, ", "),
                                     did_not, timeout.count(), store.describe()),
                         "init_process_group", rank, 0, missing, timeout.count(), "");
}

// Publishes where this rank runs and reads where the others do. Throws RankFailureError naming
// the ranks that did not join within `timeout`.
std::vector<detail::PeerInfo> rendezvous_peers(Store& store, const std::string& prefix, int rank,
                                               int size, std::chrono::milliseconds timeout) {
  meet(store, prefix, "peer", fmt::format("{} {}", this_host(), getpid()), "did not join", rank,
       size, timeout);
  auto key = [&](int r) { return fmt::format("{}/peer/{}", prefix, r); };
  std::vector<detail::PeerInfo> peers(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    std::istringstream in(store.get(key(r), timeout));
    in >> peers[static_cast<size_t>(r)].host >> peers[static_cast<size_t>(r)].pid;
  }
  return peers;
}

// A barrier in the store once this rank's connections are made, as PyTorch's
// init_process_group ends: no rank returns (and perhaps exits at once) while a peer is still
// connecting to it, which that peer would take for a failure. Nothing on the device.
void ready_barrier(Store& store, const std::string& prefix, int rank, int size,
                   std::chrono::milliseconds timeout) {
  meet(store, prefix, "ready", "1", "joined but did not finish connecting", rank, size, timeout);
}

// The message of the error `e`.
std::string error_text(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& error) {
    return error.what();
  }
}

// Runs a collective's own argument checks; returns the typed error they threw (null: none),
// which the call check then shares with the other ranks.
template <typename F>
std::exception_ptr argument_error(F&& checks) {
  try {
    checks();
  } catch (const Error&) {
    return std::current_exception();
  }
  return nullptr;
}

bool can_sum(DType dtype) {
  return dtype == kFloat32 || dtype == kFloat64 || dtype == kFloat16 || dtype == kBFloat16 ||
         dtype == kInt64;
}

}  // namespace

std::string_view backend_name(Backend backend) {
  return backend == Backend::Gloo ? "gloo" : "nccl";
}

Backend parse_backend(std::string_view name) {
  if (name == "gloo") return Backend::Gloo;
  if (name == "nccl") return Backend::Nccl;
  throw DistributedError(
      fmt::format("[init_process_group] unknown backend '{}' (gloo or nccl)", name),
      "init_process_group", -1);
}

// The communication thread: runs the jobs the *_async collectives queue, one at a time, in order.
class ProcessGroup::Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  // Lets the queued jobs run out, then joins (each ends within the group's timeout).
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void push(std::shared_ptr<Work> work, std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.emplace_back(std::move(work), std::move(job));
    }
    wake_.notify_one();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and nothing left
      auto [work, job] = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      std::exception_ptr error;
      try {
        job();
      } catch (...) {
        error = std::current_exception();
      }
      // The job's tensors let go here, before the waiting thread can run on: the Work's finish
      // holds them too, so their last reference (and any free) is the waiting thread's.
      job = nullptr;
      work->complete(error);
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::pair<std::shared_ptr<Work>, std::function<void()>>> jobs_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the rest is made
};

void Work::wait() {
  std::function<void()> finish;
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [this] { return done_; });
    // Taken out either way, so that the tensors it holds are let go on this thread.
    finish = std::move(finish_);
    finish_ = nullptr;
    error = error_;
  }
  if (error != nullptr) std::rethrow_exception(error);
  if (finish) finish();
}

bool Work::is_completed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

void Work::complete(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    error_ = std::move(error);
  }
  done_cv_.notify_all();
}

ProcessGroup::ProcessGroup(Backend backend, int rank, int size, Device device,
                           std::unique_ptr<detail::Transport> transport,
                           ProcessGroupOptions options)
    : backend_(backend),
      rank_(rank),
      size_(size),
      device_(device),
      transport_(std::move(transport)),
      options_(options) {}

ProcessGroup::~ProcessGroup() = default;

std::optional<uint64_t> ProcessGroup::wire_bytes_sent() const {
  return transport_->wire_bytes_sent();
}

void ProcessGroup::check_tensor(const char* op, const char* what, const Tensor& t) const {
  if (!t.defined()) {
    throw ValueError(fmt::format("[{}] {} is an undefined tensor", op, what), op, what);
  }
  if (t.device() != device_) {
    throw DeviceError(fmt::format("[{}] {} is on {}, but this {} process group works on {}", op,
                                  what, t.device().str(), backend_name(backend_), device_.str()),
                      op, {t.device().str(), device_.str()});
  }
  if (!t.is_contiguous()) {
    throw ValueError(fmt::format("[{}] {} of shape {} is not contiguous; call .contiguous() "
                                 "first",
                                 op, what, to_string(t.sizes())),
                     op, what);
  }
}

void ProcessGroup::begin(const char* op, const Call& call, const std::exception_ptr& rejected,
                         CallCheck check) {
  if (failure_ != nullptr) std::rethrow_exception(rejected != nullptr ? rejected : failure_);
  ++sequence_;
  if (check == CallCheck::Skip) {
    if (rejected != nullptr) std::rethrow_exception(rejected);
    return;
  }
  if (transport_->local() || (rejected != nullptr && size_ == 1)) {
    if (rejected != nullptr) std::rethrow_exception(rejected);
    return;
  }
  const std::string reason =
      rejected != nullptr ? error_text(rejected).substr(0, kMaxReasonBytes) : std::string();
  const auto sequence = static_cast<int64_t>(sequence_.load());
  const std::vector<int64_t> mine =
      rejected != nullptr
          ? std::vector<int64_t>{sequence, -call.op, 0, static_cast<int64_t>(reason.size()), -1}
          : std::vector<int64_t>{sequence, call.op, call.dtype, call.numel, call.extra};
  const std::vector<int64_t> all = exchange_calls(op, mine, rejected);
  auto row = [&](int r) { return &all[static_cast<size_t>(r) * kCallFields]; };
  // The texts of the rejecting ranks, when there are any (every rank sees the same table, so
  // every rank makes this second exchange, or none does).
  size_t reason_words = 0;
  for (int r = 0; r < size_; ++r) {
    if (row(r)[1] < 0) {
      reason_words = std::max(reason_words, static_cast<size_t>(row(r)[3] + 7) / 8);
    }
  }
  std::vector<std::string> reasons(static_cast<size_t>(size_));
  if (reason_words > 0) {
    const std::vector<int64_t> texts =
        exchange_calls(op, pack_text(reason, reason_words), rejected);
    for (int r = 0; r < size_; ++r) {
      if (row(r)[1] >= 0) continue;
      const size_t nbytes = std::min(static_cast<size_t>(row(r)[3]), reason_words * 8);
      std::string& text = reasons[static_cast<size_t>(r)];
      text.resize(nbytes);
      std::memcpy(text.data(), &texts[static_cast<size_t>(r) * reason_words], nbytes);
    }
  }
  if (rejected != nullptr) std::rethrow_exception(rejected);
  // The rank to name: the lowest that rejected its call, else the lowest whose call differs
  // from rank 0's.
  int mismatch = -1;
  for (int r = 0; r < size_ && mismatch < 0; ++r) {
    if (row(r)[1] < 0) mismatch = r;
  }
  for (int r = 1; r < size_ && mismatch < 0; ++r) {
    for (size_t f = 0; f < kCallFields; ++f) {
      if (row(r)[f] != row(0)[f]) mismatch = r;
    }
  }
  if (mismatch < 0) return;
  std::vector<std::string> calls;
  std::vector<std::string> lines;
  std::vector<int> rejecting;
  for (int r = 0; r < size_; ++r) {
    const int64_t* f = row(r);
    if (f[1] < 0) {
      rejecting.push_back(r);
      calls.push_back(fmt::format("{}, rejected by rank {}: {}", op_code_name(-f[1]), r,
                                  reasons[static_cast<size_t>(r)]));
    } else {
      calls.push_back(describe_call(f));
    }
    lines.push_back(fmt::format("rank {}: collective #{} {}", r, f[0], calls.back()));
  }
  if (!rejecting.empty()) {
    throw CollectiveMismatchError(
        fmt::format("[{}] collective #{} did not run: rank{} {} rejected {} own arguments, so no "
                    "rank ran it ({})",
                    op, sequence_.load(), rejecting.size() == 1 ? "" : "s",
                    fmt::join(rejecting, ", "), rejecting.size() == 1 ? "its" : "their",
                    fmt::join(lines, "; ")),
        op, rank_, sequence_.load(), calls, mismatch);
  }
  throw CollectiveMismatchError(
      fmt::format("[{}] collective #{} does not match across ranks ({}); every rank must call the "
                  "same collectives in the same order, with tensors of the same dtype and numel",
                  op, sequence_.load(), fmt::join(lines, "; ")),
      op, rank_, sequence_.load(), calls, mismatch);
}

std::vector<int64_t> ProcessGroup::exchange_calls(const char* op, const std::vector<int64_t>& mine,
                                                  const std::exception_ptr& rejected) {
  try {
    return transport_->exchange(mine);
  } catch (const detail::TransportFailure& e) {
    if (rejected == nullptr) fail(op, e.what());
    // The group is broken all the same, but this rank's own error came first.
    try {
      fail(op, e.what());
    } catch (const RankFailureError&) {
    }
    std::rethrow_exception(rejected);
  }
}

void ProcessGroup::fail(const char* op, const std::string& transport_message) {
  // A peer's connections close while its process exits, a moment before the process is gone:
  // look again for a second before concluding that nobody has exited.
  Diagnosis d = diagnose(transport_->peers(), rank_);
  for (int attempt = 0; attempt < 20 && d.gone.empty(); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    d = diagnose(transport_->peers(), rank_);
  }
  std::string who;
  if (!d.gone.empty()) {
    std::vector<std::string> names;
    for (int r : d.gone) {
      names.push_back(fmt::format("rank {} (pid {})", r, transport_->peers()[r].pid));
    }
    who = fmt::format("{} {} exited", fmt::join(names, ", "), d.gone.size() == 1 ? "has" : "have");
  } else if (!d.stopped.empty()) {
    std::vector<std::string> names;
    for (int r : d.stopped) {
      names.push_back(fmt::format("rank {} (pid {})", r, transport_->peers()[r].pid));
    }
    who = fmt::format(
        "no rank on this host has exited, but {} {} stopped (a SIGSTOP, a terminal or a "
        "debugger) and never reached this collective (waited up to {} ms, MEMGRAD_DIST_TIMEOUT)",
        fmt::join(names, ", "), d.stopped.size() == 1 ? "is" : "are", options_.timeout.count());
  } else {
    who = fmt::format(
        "no rank on this host has exited; a rank may be stuck before this "
        "collective or the network is down (waited up to {} ms, "
        "MEMGRAD_DIST_TIMEOUT)",
        options_.timeout.count());
  }
  if (!d.elsewhere.empty()) {
    who += fmt::format("; ranks {} run on other hosts and cannot be checked from here",
                       fmt::join(d.elsewhere, ", "));
  }
  const RankFailureError error(fmt::format("[{}] collective #{} failed on rank {}: {}. {}", op,
                                           sequence_.load(), rank_, who, transport_message),
                               op, rank_, sequence_.load(), d.gone, options_.timeout.count(),
                               transport_message);
  failure_ = std::make_exception_ptr(error);
  // With nobody gone the note says so ("gone" and no rank): the launcher then looks for the
  // rank that is still running, stuck, instead of naming this one.
  write_failure_note({d.gone, error.what()});
  throw error;
}

ProcessGroup::Call ProcessGroup::all_reduce_call(const Tensor& tensor, ReduceOp op,
                                                 std::exception_ptr& rejected) const {
  Call call{kAllReduce};
  rejected = argument_error([&] {
    check_tensor("all_reduce", "tensor", tensor);
    if (!can_sum(tensor.dtype()) || (op == ReduceOp::Avg && !is_floating(tensor.dtype()))) {
      throw DTypeError(
          fmt::format("[all_reduce] cannot {} {} tensors", op == ReduceOp::Avg ? "average" : "sum",
                      dtype_name(tensor.dtype())),
          "all_reduce", {tensor.dtype()});
    }
    call = {kAllReduce, static_cast<int64_t>(tensor.dtype()), tensor.numel(), -1};
  });
  return call;
}

void ProcessGroup::finish_all_reduce(const Tensor& tensor, ReduceOp op) const {
  tensor.impl()->storage().bump_version();
  if (op == ReduceOp::Avg && size_ > 1) {
    NoGradGuard no_grad;
    Tensor t = tensor;
    t.div_(static_cast<double>(size_));
  }
}

void ProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op, CallCheck check) {
  wait_in_flight();
  std::exception_ptr rejected;
  const Call call = all_reduce_call(tensor, op, rejected);
  begin("all_reduce", call, rejected, check);
  if (!transport_->local() && tensor.numel() > 0) {
    try {
      transport_->all_reduce_sum(tensor.impl()->data(), static_cast<size_t>(tensor.numel()),
                                 tensor.dtype());
    } catch (const detail::TransportFailure& e) {
      fail("all_reduce", e.what());
    }
  }
  finish_all_reduce(tensor, op);
}

std::shared_ptr<Work> ProcessGroup::all_reduce_async(const Tensor& tensor, ReduceOp op,
                                                     CallCheck check) {
  std::exception_ptr rejected;
  const Call call = all_reduce_call(tensor, op, rejected);
  if (runs_at_once(rejected)) {
    all_reduce(tensor, op, check);  // throws a rejection as all_reduce does
    return completed_work();
  }
  return start_async(
      [this, tensor, call, check] {
        begin("all_reduce", call, nullptr, check);
        if (tensor.numel() == 0) return;
        try {
          transport_->all_reduce_sum(tensor.impl()->data(), static_cast<size_t>(tensor.numel()),
                                     tensor.dtype());
        } catch (const detail::TransportFailure& e) {
          fail("all_reduce", e.what());
        }
      },
      [this, tensor, op] { finish_all_reduce(tensor, op); });
}

void ProcessGroup::wait_in_flight() {
  std::vector<std::shared_ptr<Work>> works = std::move(in_flight_);
  in_flight_.clear();
  std::exception_ptr first;
  for (const std::shared_ptr<Work>& work : works) {
    try {
      work->wait();
    } catch (...) {
      if (first == nullptr) first = std::current_exception();
    }
  }
  if (first != nullptr) std::rethrow_exception(first);
}

ProcessGroup::Call ProcessGroup::reduce_scatter_call(const Tensor& output, const Tensor& input,
                                                     ReduceOp op,
                                                     std::exception_ptr& rejected) const {
  Call call{kReduceScatter};
  rejected = argument_error([&] {
    check_tensor("reduce_scatter", "output", output);
    check_tensor("reduce_scatter", "input", input);
    if (input.dtype() != output.dtype() || !can_sum(input.dtype()) ||
        (op == ReduceOp::Avg && !is_floating(input.dtype()))) {
      throw DTypeError(fmt::format("[reduce_scatter] input ({}) and output ({}) must have one "
                                   "dtype that can be {}",
                                   dtype_name(input.dtype()), dtype_name(output.dtype()),
                                   op == ReduceOp::Avg ? "averaged" : "summed"),
                       "reduce_scatter", {input.dtype(), output.dtype()});
    }
    if (input.numel() != output.numel() * size_) {
      throw ShapeError(
          fmt::format("[reduce_scatter] input of shape {} must hold world size ({}) x "
                      "output's {} elements (output shape {})",
                      to_string(input.sizes()), size_, output.numel(), to_string(output.sizes())),
          "reduce_scatter", ShapeRoles::operands(input.sizes(), output.sizes()));
    }
    call = {kReduceScatter, static_cast<int64_t>(input.dtype()), output.numel(), input.numel()};
  });
  return call;
}

Tensor ProcessGroup::reduce_scatter_staging(const Tensor& output, const Tensor& input) {
  const Tensor staging =
      empty({size_, output.numel()}, TensorOptions(input.dtype()).with_device(device_));
  staging_peak_ =
      std::max(staging_peak_, static_cast<int64_t>(staging.impl()->storage().allocated_nbytes()));
  return staging;
}

void ProcessGroup::move_reduce_scatter(const Tensor& staging, const Tensor& input) {
  try {
    transport_->all_to_all(
        staging.impl()->data(), input.impl()->data(),
        static_cast<size_t>(staging.numel() / size_) * element_size(input.dtype()));
  } catch (const detail::TransportFailure& e) {
    fail("reduce_scatter", e.what());
  }
}

void ProcessGroup::finish_reduce_scatter(const Tensor& output, const Tensor& staging,
                                         ReduceOp op) const {
  // Row j of the staging buffer is rank j's contribution to this rank's piece; the rows are
  // summed in rank order, the same order for every element on every rank.
  NoGradGuard no_grad;
  Tensor flat = output.view({output.numel()});
  if (staging.defined()) {
    flat.copy_(staging.select(0, 0));
    for (int r = 1; r < size_; ++r) flat.add_(staging.select(0, r));
  }
  if (op == ReduceOp::Avg && size_ > 1) flat.div_(static_cast<double>(size_));
}

void ProcessGroup::reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op,
                                  CallCheck check) {
  wait_in_flight();
  std::exception_ptr rejected;
  const Call call = reduce_scatter_call(output, input, op, rejected);
  begin("reduce_scatter", call, rejected, check);
  NoGradGuard no_grad;
  Tensor out = output;
  if (transport_->local()) {
    out.copy_(input);
    return;
  }
  if (transport_->has_reduce_scatter()) {
    try {
      transport_->reduce_scatter_sum(output.impl()->data(), input.impl()->data(),
                                     static_cast<size_t>(output.numel()), input.dtype());
    } catch (const detail::TransportFailure& e) {
      fail("reduce_scatter", e.what());
    }
    output.impl()->storage().bump_version();
    finish_reduce_scatter(output, Tensor(), op);
    return;
  }
  const Tensor staging = reduce_scatter_staging(output, input);
  move_reduce_scatter(staging, input);
  finish_reduce_scatter(output, staging, op);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_async(const Tensor& output, const Tensor& input,
                                                         ReduceOp op, CallCheck check) {
  std::exception_ptr rejected;
  const Call call = reduce_scatter_call(output, input, op, rejected);
  if (runs_at_once(rejected) || transport_->has_reduce_scatter()) {
    reduce_scatter(output, input, op, check);  // throws a rejection as reduce_scatter does
    return completed_work();
  }
  // The staging buffer is allocated here and freed by the waiting thread (the finish), so the
  // device's allocations keep the caller's order.
  Tensor staging = reduce_scatter_staging(output, input);
  return start_async(
      [this, staging, input, call, check] {
        begin("reduce_scatter", call, nullptr, check);
        move_reduce_scatter(staging, input);
      },
      [this, output, input, staging, op]() mutable {
        finish_reduce_scatter(output, staging, op);
        staging = Tensor();
      });
}

ProcessGroup::Call ProcessGroup::all_gather_call(const Tensor& output, const Tensor& input,
                                                 std::exception_ptr& rejected) const {
  Call call{kAllGather};
  rejected = argument_error([&] {
    check_tensor("all_gather", "output", output);
    check_tensor("all_gather", "input", input);
    if (input.dtype() != output.dtype()) {
      throw DTypeError(fmt::format("[all_gather] input ({}) and output ({}) must have one dtype",
                                   dtype_name(input.dtype()), dtype_name(output.dtype())),
                       "all_gather", {input.dtype(), output.dtype()});
    }
    if (output.numel() != input.numel() * size_) {
      throw ShapeError(
          fmt::format("[all_gather] output of shape {} must hold world size ({}) x "
                      "input's {} elements (input shape {})",
                      to_string(output.sizes()), size_, input.numel(), to_string(input.sizes())),
          "all_gather", ShapeRoles::operands(output.sizes(), input.sizes()));
    }
    call = {kAllGather, static_cast<int64_t>(input.dtype()), output.numel(), input.numel()};
  });
  return call;
}

void ProcessGroup::move_all_gather(const Tensor& output, const Tensor& input) {
  const size_t in_bytes = input.nbytes();
  if (in_bytes == 0) return;
  const char* mine = static_cast<const char*>(output.impl()->data()) + in_bytes * rank_;
  const bool in_place = input.impl()->data() == mine;
  try {
    transport_->all_gather(output.impl()->data(), in_place ? nullptr : input.impl()->data(),
                           in_bytes);
  } catch (const detail::TransportFailure& e) {
    fail("all_gather", e.what());
  }
}

void ProcessGroup::all_gather(const Tensor& output, const Tensor& input, CallCheck check) {
  wait_in_flight();
  std::exception_ptr rejected;
  const Call call = all_gather_call(output, input, rejected);
  begin("all_gather", call, rejected, check);
  move_all_gather(output, input);
  output.impl()->storage().bump_version();
}

std::shared_ptr<Work> ProcessGroup::all_gather_async(const Tensor& output, const Tensor& input,
                                                     CallCheck check) {
  std::exception_ptr rejected;
  const Call call = all_gather_call(output, input, rejected);
  if (runs_at_once(rejected)) {
    all_gather(output, input, check);  // throws a rejection as all_gather does
    return completed_work();
  }
  return start_async(
      [this, output, input, call, check] {
        begin("all_gather", call, nullptr, check);
        move_all_gather(output, input);
      },
      [output, input] { output.impl()->storage().bump_version(); });
}

bool ProcessGroup::runs_at_once(const std::exception_ptr& rejected) const {
  return rejected != nullptr || transport_->local() || backend_ != Backend::Gloo;
}

std::shared_ptr<Work> ProcessGroup::completed_work() {
  auto work = std::make_shared<Work>();
  work->complete(nullptr);
  return work;
}

std::shared_ptr<Work> ProcessGroup::start_async(std::function<void()> job,
                                                std::function<void()> finish) {
  auto work = std::make_shared<Work>();
  work->finish_ = std::move(finish);
  if (worker_ == nullptr) worker_ = std::make_unique<Worker>();
  in_flight_.push_back(work);
  worker_->push(work, std::move(job));
  return work;
}

void ProcessGroup::broadcast(const Tensor& tensor, int src) {
  wait_in_flight();
  Call call{kBroadcast};
  const std::exception_ptr rejected = argument_error([&] {
    check_tensor("broadcast", "tensor", tensor);
    if (src < 0 || src >= size_) {
      throw ValueError(
          fmt::format("[broadcast] src {} is not a rank of this group (0 to {})", src, size_ - 1),
          "broadcast", "src", fmt::format("{}", src));
    }
    call = {kBroadcast, static_cast<int64_t>(tensor.dtype()), tensor.numel(), src};
  });
  begin("broadcast", call, rejected);
  if (!transport_->local() && tensor.numel() > 0) {
    try {
      transport_->broadcast(tensor.impl()->data(), tensor.nbytes(), src);
    } catch (const detail::TransportFailure& e) {
      fail("broadcast", e.what());
    }
  }
  tensor.impl()->storage().bump_version();
}

void ProcessGroup::barrier() {
  wait_in_flight();
  begin("barrier", {kBarrier, 0, 0, -1}, nullptr);
  if (transport_->local()) return;
  try {
    transport_->barrier();
  } catch (const detail::TransportFailure& e) {
    fail("barrier", e.what());
  }
}

void check_same_layout(ProcessGroup& pg, const std::vector<int64_t>& layout, const char* who,
                       const char* what) {
  NoGradGuard no_grad;
  const Tensor first = from_vector(layout, {static_cast<int64_t>(layout.size())}).to(pg.device());
  pg.broadcast(first, 0);
  if (pg.device().is_meta()) return;  // alone, and no values: it allocated what a rank does
  const std::vector<int64_t> reference = first.to_vector<int64_t>();
  if (reference != layout) {
    throw DistributedError(
        fmt::format("[{}] rank {}'s {} hold {} elements, rank 0's {}: every "
                    "rank must wrap the same model with the same options",
                    who, pg.rank(), what, fmt::join(layout, ", "), fmt::join(reference, ", ")),
        who, pg.rank());
  }
}

std::shared_ptr<ProcessGroup> init_process_group(Backend backend, int rank, int world_size,
                                                 std::optional<Store> store,
                                                 ProcessGroupOptions options, int local_rank,
                                                 std::optional<Device> device) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw DistributedError(
        fmt::format("[init_process_group] rank {} is not in a world of size {}", rank, world_size),
        "init_process_group", rank);
  }
  if (options.timeout.count() <= 0) {
    throw DistributedError("[init_process_group] the timeout must be positive",
                           "init_process_group", rank);
  }
  if (device && device->is_meta()) {
    return std::make_shared<ProcessGroup>(backend, rank, world_size, *device,
                                          detail::make_meta_transport(world_size, backend, *device),
                                          options);
  }
  if (device && !(backend == Backend::Gloo ? device->is_host() : device->is_cuda())) {
    throw DistributedError(
        fmt::format(
            "[init_process_group] the {} backend works on {}, not on {}", backend_name(backend),
            backend == Backend::Gloo ? "cpu or sim:N (host memory)" : "cuda:N", device->str()),
        "init_process_group", rank);
  }
  if (local_rank < 0) local_rank = device && device->is_cuda() ? device->index() : rank;
  // Groups are numbered in the order a process makes them; every rank makes them in the same
  // order (as in PyTorch), so group k meets its peers under the same keys.
  static int groups_made = 0;
  const int group = groups_made++;
  const std::string prefix =
      fmt::format("memgrad/{}/group{}", env_string("MEMGRAD_RUN_ID").value_or("run"), group);
  const Device on =
      backend == Backend::Gloo ? device.value_or(kCPU) : Device(DeviceType::CUDA, local_rank);
  if (backend == Backend::Nccl && MEMGRAD_WITH_NCCL && local_rank >= cuda::device_count()) {
    const int usable = cuda::device_count();
    throw DistributedError(
        fmt::format("[init_process_group] rank {}: the nccl backend runs on cuda:{} (LOCAL_RANK), "
                    "and this machine has {} usable CUDA device{}",
                    rank, local_rank, usable, usable == 1 ? "" : "s"),
        "init_process_group", rank);
  }
  if (backend == Backend::Gloo && world_size == 1) {
    return std::make_shared<ProcessGroup>(backend, rank, world_size, on,
                                          detail::make_local_transport(), options);
  }
  std::vector<detail::PeerInfo> peers;
  if (world_size > 1) {
    if (!store) {
      throw DistributedError(
          fmt::format("[init_process_group] {} ranks need a store to meet in", world_size),
          "init_process_group", rank);
    }
    peers = rendezvous_peers(*store, prefix, rank, world_size, options.timeout);
  }
  std::unique_ptr<detail::Transport> transport;
  try {
    if (backend == Backend::Gloo) {
      transport =
          detail::make_gloo_transport(rank, world_size, *store, prefix, options.timeout, peers);
    } else {
      transport = detail::make_nccl_transport(
          rank, world_size, local_rank, store ? &*store : nullptr, prefix, peers, options.timeout);
    }
  } catch (const detail::TransportFailure& e) {
    const Diagnosis d = diagnose(peers, rank);
    RankFailureError error(
        fmt::format("[init_process_group] rank {} could not connect to its "
                    "peers within {} ms{}. {}",
                    rank, options.timeout.count(),
                    d.gone.empty()
                        ? std::string()
                        : fmt::format(" (ranks {} have exited)", fmt::join(d.gone, ", ")),
                    e.what()),
        "init_process_group", rank, 0, d.gone, options.timeout.count(), e.what());
    if (!d.gone.empty()) write_failure_note({d.gone, error.what()});
    throw error;
  }
  if (world_size > 1) ready_barrier(*store, prefix, rank, world_size, options.timeout);
  return std::make_shared<ProcessGroup>(backend, rank, world_size, on, std::move(transport),
                                        options);
}

std::shared_ptr<ProcessGroup> init_process_group(Backend backend, std::optional<Device> device) {
  const RendezvousEnv env = rendezvous_env();
  ProcessGroupOptions options;
  options.timeout = timeout_from_env();
  std::optional<Store> store;
  if (env.world_size > 1 && !(device && device->is_meta())) store = Store::from_env();
  return init_process_group(backend, env.rank, env.world_size, store, options, env.local_rank,
                            device);
}

bool any_rank(ProcessGroup& pg, bool flag) {
  NoGradGuard no_grad;
  const Tensor count =
      full({1}, flag ? 1.0 : 0.0, TensorOptions(kFloat32).with_device(pg.device()));
  pg.all_reduce(count, ReduceOp::Sum);
  return count.item_or(flag ? 1.0 : 0.0) > 0.0;
}

}  // namespace memgrad::distributed
