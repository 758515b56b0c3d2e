// Memory snapshots of a device, named as PyTorch's torch.cuda.memory functions: the value
// (memory_snapshot) and the file (dump_snapshot) that pytorch.org/memory_viz opens. Recording
// the history they include: record_memory_history in engine/memory.h.
#pragma once

#include <string>

#include "engine/device.h"
#include "interop/py_value.h"

namespace memgrad {

// PyTorch's torch.cuda.memory._snapshot() of `device`: its segments and blocks now, the events
// recorded so far, and its allocator settings (interop/memory_snapshot.h says what each key
// holds). While history is recorded, the call itself is recorded first, as in PyTorch: a
// `snapshot` entry with the active bytes, the last of the trace. Allocates: host memory for the
// value.
PyValue memory_snapshot(Device device = kCPU);
// Writes memory_snapshot(device) to `path` (_dump_snapshot): pickle, which pytorch.org/memory_viz
// and `python -m torch.cuda._memory_viz` open, or JSON for a path ending in ".json". The file is
// replaced all or nothing. Throws IoError.
void dump_snapshot(const std::string& path, Device device = kCPU);

}  // namespace memgrad
