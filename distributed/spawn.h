// spawn_ranks: runs this program as N ranks on this host, the way a program launches its own
// workers (torch.multiprocessing.spawn); ./memgrad launch (tools/launch.py) is the same for any
// program, from the command line.
//
// Each rank is a new process of this executable (/proc/self/exe, so no fork of a process with
// running threads) with the given arguments and torchrun's variables: RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MEMGRAD_STORE_PATH (a fresh folder for Gloo's file store, removed
// afterwards) and OMP_NUM_THREADS=1 unless the environment sets it (N ranks share the cores, as
// torchrun does). Their output (stdout and stderr together) is captured per rank. When a rank
// fails (a non-zero exit status or a signal) the others are stopped, SIGTERM then SIGKILL after
// two seconds, unless the options say otherwise; a run longer than the timeout is stopped alike.
// Allocates: nothing on any device; the children's memory is their own.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace memgrad::distributed {

struct SpawnOptions {
  std::vector<std::string> args;                         // argv[1...] of every rank
  std::vector<std::pair<std::string, std::string>> env;  // extra variables for every rank
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
  bool stop_others_on_failure = true;
};

struct RankOutcome {
  int rank = 0;
  int exit_status = -1;  // the exit status, or -1 when the rank died of a signal
  int signal = 0;        // the signal that ended it, or 0
  bool stopped = false;  // ended by spawn_ranks (another rank failed, or the timeout)
  std::string output;    // what it wrote to stdout and stderr, interleaved as written
};

struct SpawnResult {
  std::vector<RankOutcome> ranks;  // indexed by rank
  int first_failed_rank = -1;      // the rank that failed first, or -1 (failure_note.h)
  bool timed_out = false;
  bool ok() const { return first_failed_rank < 0 && !timed_out; }
  // "rank 1 exited with status 3" / "rank 0 was killed by signal 9" / "timed out after 300 s".
  std::string describe_failure() const;
};

// Starts `world_size` ranks and waits for all of them. Throws DistributedError when a process
// cannot be started or the store folder cannot be made.
SpawnResult spawn_ranks(int world_size, const SpawnOptions& options);

}  // namespace memgrad::distributed
