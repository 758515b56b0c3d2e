// The typed errors of a process group.
//
// A collective either completes on every rank or throws on every rank that can still run code:
//   CollectiveMismatchError  the ranks called a collective with different arguments (another op,
//                            dtype, element count or root), or a peer's own checks rejected its
//                            arguments; every rank finds out from the call descriptions all
//                            ranks exchange first, before any data moves, so each one throws
//                            instead of waiting forever (the rejecting rank its own typed error);
//   RankFailureError         a peer closed its connections (its process exited) or did not answer
//                            within the process group's timeout; the error names the ranks whose
//                            processes are known to be gone;
//   DistributedError         the base of both, and the error of everything else (bad rendezvous
//                            variables, a backend this build lacks, a tensor on the wrong device).
// The fields say which collective failed: its op name and its sequence number on the group
// (1 for the first collective), so a log of several ranks can be lined up.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "allocator/error.h"

namespace memgrad::distributed {

class DistributedError : public Error {
 public:
  // `op`: "all_reduce", "init_process_group", ...; `rank`: this process's rank (-1 before the
  // group knows it); `sequence`: the collective's number on its group (0: not a collective).
  DistributedError(std::string message, std::string op, int rank, uint64_t sequence = 0)
      : Error(std::move(message)), op_(std::move(op)), rank_(rank), sequence_(sequence) {}
  const std::string& op() const { return op_; }
  int rank() const { return rank_; }
  uint64_t sequence() const { return sequence_; }

 private:
  std::string op_;
  int rank_;
  uint64_t sequence_;
};

// Ranks disagree on a collective. calls() describes each rank's call, indexed by rank
// ("all_reduce float32 numel 1024", or "all_reduce, rejected by rank 1: <its error's text>" for a
// rank whose own checks rejected its arguments); mismatching_rank() is the lowest rank that
// rejected its arguments, or else the lowest rank whose call differs from rank 0's.
class CollectiveMismatchError : public DistributedError {
 public:
  CollectiveMismatchError(std::string message, std::string op, int rank, uint64_t sequence,
                          std::vector<std::string> calls, int mismatching_rank)
      : DistributedError(std::move(message), std::move(op), rank, sequence),
        calls_(std::move(calls)),
        mismatching_rank_(mismatching_rank) {}
  const std::vector<std::string>& calls() const { return calls_; }
  int mismatching_rank() const { return mismatching_rank_; }

 private:
  std::vector<std::string> calls_;
  int mismatching_rank_;
};

// A collective (or the rendezvous) could not complete. failed_ranks(): the ranks found gone (their
// process exited, or they never joined the rendezvous), in increasing order; empty when none could
// be identified (a peer on another host, or one that is alive but stuck). timeout_ms(): the
// group's timeout. transport_message(): what the transport (Gloo, NCCL) reported.
class RankFailureError : public DistributedError {
 public:
  RankFailureError(std::string message, std::string op, int rank, uint64_t sequence,
                   std::vector<int> failed_ranks, int64_t timeout_ms, std::string transport_message)
      : DistributedError(std::move(message), std::move(op), rank, sequence),
        failed_ranks_(std::move(failed_ranks)),
        timeout_ms_(timeout_ms),
        transport_message_(std::move(transport_message)) {}
  const std::vector<int>& failed_ranks() const { return failed_ranks_; }
  int64_t timeout_ms() const { return timeout_ms_; }
  const std::string& transport_message() const { return transport_message_; }

 private:
  std::vector<int> failed_ranks_;
  int64_t timeout_ms_;
  std::string transport_message_;
};

}  // namespace memgrad::distributed
