// The rendezvous environment, with torchrun's names: what ./memgrad launch (or a job scheduler)
// sets for each rank.
//
//   RANK, WORLD_SIZE        this process's rank and the number of ranks (required)
//   LOCAL_RANK              its rank on this host (default: RANK); picks cuda:LOCAL_RANK for NCCL
//   LOCAL_WORLD_SIZE        the ranks on this host (default: WORLD_SIZE); whether DDP overlaps
//                           by default (distributed_data_parallel.h)
//   MEMGRAD_STORE_PATH      a file store's folder (one host), or
//   MASTER_ADDR, MASTER_PORT  a redis-server (several hosts)
//   MEMGRAD_RUN_ID          prefix of every store key (several runs in one store)
//   MEMGRAD_DIST_TIMEOUT    seconds a collective may wait for a peer (default 60)
//   GLOO_SOCKET_IFNAME      the network interface Gloo's TCP transport uses (as in PyTorch)
//   MEMGRAD_ERROR_FILE      where a rank that finds peers gone notes them (failure_note.h)
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace memgrad::distributed {

// The default of MEMGRAD_DIST_TIMEOUT: how long a collective waits for a peer before it throws
// RankFailureError (a peer whose process exited is noticed sooner: its connection closes).
inline constexpr std::chrono::seconds kDefaultTimeout{60};

struct RendezvousEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
};

// RANK, WORLD_SIZE and LOCAL_RANK. Throws DistributedError naming the variable when one is
// missing or out of range (0 <= RANK < WORLD_SIZE).
RendezvousEnv rendezvous_env();

// MEMGRAD_DIST_TIMEOUT in seconds (a positive number), or kDefaultTimeout when unset.
std::chrono::milliseconds timeout_from_env();

// The variable's value when it is set and not empty.
std::optional<std::string> env_string(const char* name);

// The variable as an integer in [min, max]. Throws DistributedError naming it when it is missing
// or not such an integer.
int64_t env_int(const char* name, int64_t min, int64_t max);

}  // namespace memgrad::distributed
