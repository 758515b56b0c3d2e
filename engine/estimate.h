// Knowing a program's memory before running it: the program run on a meta device, whose tensors
// have shapes and no values (docs/estimate.md). `./memgrad estimate` does the same for the
// training programs from outside; this is the call for one's own code.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "allocator/config.h"
#include "engine/device.h"

namespace memgrad {

struct MemoryEstimate {
  bool fits = true;  // false: the program ran out of the device's memory
  size_t capacity = 0;
  size_t peak_allocated = 0, peak_reserved = 0;    // over the program, up to an OOM
  size_t allocated_after = 0, reserved_after = 0;  // when it returned, or ran out
  std::string out_of_memory;                       // the OutOfMemoryError's message
};

// Runs `program(device)` with device = a fresh meta:`index` of `capacity` bytes whose allocator
// is built from `config` (a policy and its options, as MEMGRAD_ALLOC_CONF), and returns what it
// allocated there: the same bytes as the program on a real device of that capacity and policy,
// as long as it reads no value of a meta tensor (item_or reads an assumed one). An
// OutOfMemoryError of that device ends the program and is reported (fits = false), not thrown;
// any other error is thrown (a value read on the meta device: DeviceError naming the op; a bad
// config: ConfigError). The device is fresh again afterwards. Allocates: on meta:`index` only
// (addresses, no pages), and what the program allocates elsewhere.
MemoryEstimate estimate_memory(const std::function<void(Device)>& program, size_t capacity,
                               const AllocatorConfig& config = {}, int index = 0);

}  // namespace memgrad
