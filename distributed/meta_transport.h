// The transport of a meta rank: each rank of N runs alone in its process, on a meta device
// (engine/device.h), so a data-parallel run can be estimated one rank at a time with no peers.
#pragma once

#include <memory>

#include "distributed/process_group.h"
#include "distributed/transport.h"
#include "engine/device.h"

namespace memgrad::distributed::detail {

// Every collective allocates on `device` what the engine `as` allocates for it and moves no
// bytes: the call check reads back this rank's own description for every rank (so it always
// agrees), NCCL's call check and barrier allocate their small staging tensors on the device as
// the NCCL transport does, Gloo reduce-scatters through the process group's staging buffer, and
// a Gloo group of one rank is local, as init_process_group makes it.
std::unique_ptr<Transport> make_meta_transport(int size, Backend as, Device device);

}  // namespace memgrad::distributed::detail
