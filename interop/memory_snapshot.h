// PyTorch's memory snapshot written from a memgrad allocator, in the structure of
// torch.cuda.memory._snapshot(), as a PyValue and as a file.
//
// Written (memory_snapshot): a dict with
//   segments        one per region a policy obtained from its source: device, address,
//                   total_size, allocated_size, active_size, requested_size, stream,
//                   segment_type ("small"/"large"), segment_pool_id (0, 0), is_expandable,
//                   frames, and blocks tiling it in address order (address, size,
//                   requested_size, state, frames);
//   device_traces   one list per device index: the policy's trace events as PyTorch's
//                   TraceEntry dicts (alloc, free_requested, free_completed, segment_alloc,
//                   segment_free, segment_map, segment_unmap, oom with device_free, and a
//                   snapshot entry per snapshot taken while recording: addr 0, size the active
//                   bytes, no frames), sizes as PyTorch records them (requested bytes for alloc
//                   and frees);
//   allocator_settings  the active AllocatorConfig under PyTorch's keys;
//   memgrad         the device's name, the policy and the source's capacity (ignored by
//                   PyTorch's tools).
// Each event's phase, op and label go into user_metadata and one synthetic frame (filename: the
// op, name: the phase and label), so hovering a block in pytorch.org/memory_viz says which op
// allocated it. Live blocks carry the frame of the alloc event that made them when it is still
// in the trace. Addresses are relative to the source's base, as memgrad's traces show them.
//
//
// Read back: interop/snapshot_import.h.
#pragma once

#include <string>

#include "allocator/config.h"
#include "allocator/policy_allocator.h"
#include "interop/py_value.h"

namespace memgrad {

// The snapshot of `allocator` as device `device_index` (cuda:N and sim:N: N; cpu: 0), its trace
// as recorded so far (empty when recording is off), and `config` as allocator_settings. When
// the trace is on, the snapshot is first recorded in it, as PyTorch's _snapshot() does: a
// TraceAction::Snapshot event (address 0, nbytes the active bytes of the segments returned,
// allocated and pending-free blocks at their block sizes), the last entry of the trace written
// unless another thread allocates meanwhile. Allocates: host memory for the value, and the
// event in the trace's ring (which it may overflow, as in PyTorch).
PyValue memory_snapshot(PolicyAllocator& allocator, const AllocatorConfig& config,
                        int device_index);

// Writes `snapshot` to `path`, replacing it all or nothing: JSON when the path ends in ".json",
// else pickle protocol 2 (the opcodes pytorch.org/memory_viz reads). Throws IoError.
void write_snapshot_file(const std::string& path, const PyValue& snapshot);

}  // namespace memgrad
