// A device's memory snapshot: its allocator, its options and its index, written as PyTorch's.
#include "engine/memory_snapshot.h"

#include "engine/memory.h"
#include "interop/memory_snapshot.h"

namespace memgrad {

PyValue memory_snapshot(Device device) {
  PolicyAllocator& allocator = allocator_for(device);
  // Snapshots number devices as PyTorch does: cpu 0, sim:N and cuda:N N.
  return memory_snapshot(allocator, allocator_config(device), device.index());
}

void dump_snapshot(const std::string& path, Device device) {
  write_snapshot_file(path, memory_snapshot(device));
}

}  // namespace memgrad
