// The NCCL transport (CUDA tensors): kernels/cuda/nccl.h behind the Transport interface.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "distributed/store.h"
#include "distributed/transport.h"

namespace memgrad::distributed::detail {

// Joins a NCCL communicator of `size` ranks on cuda:`local_rank`; rank 0 publishes the
// communicator's id in `store` under `prefix` (no store is needed for one rank). Throws
// TransportFailure with NCCL's message, DistributedError in a build without CUDA.
// Allocates: NCCL's own buffers (cudaMalloc, outside memgrad's allocator).
std::unique_ptr<Transport> make_nccl_transport(int rank, int size, int local_rank, Store* store,
                                               const std::string& prefix,
                                               std::vector<PeerInfo> peers,
                                               std::chrono::milliseconds timeout);

}  // namespace memgrad::distributed::detail
