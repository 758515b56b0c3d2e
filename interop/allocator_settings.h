// PyTorch's allocator_settings, both ways: what a snapshot says of the allocator's
// configuration, written from an AllocatorConfig and read back into one for a replay.
#pragma once

#include <string>
#include <vector>

#include "allocator/config.h"
#include "interop/py_value.h"

namespace memgrad {

// The settings dict PyTorch writes, from `config` (max_split_size -1 for no limit, as PyTorch).
PyValue allocator_settings_of(const AllocatorConfig& config);

// The caching configuration a snapshot's allocator_settings describe, into `config`: PyTorch's
// keys (max_split_size, garbage_collection_threshold, roundup_power2_divisions,
// expandable_segments: the expandable policy; PYTORCH_CUDA_ALLOC_CONF's
// max_non_split_rounding_mb) and memgrad's own (memgrad_policy, per_process_memory_fraction,
// max_non_split_rounding_size). What the replay cannot honour goes into `notes`, each with the
// choice made: one line naming every setting left out (a value other than the default of a
// setting memgrad lacks: release_lock_on_cudamalloc, pinned_*, graph_capture_record_stream_reuse;
// an unknown key; a known one of the wrong type), and a line each for backend:cudaMallocAsync,
// expandable segments, an overflowed ring buffer and a roundup interval memgrad lacks. Throws
// TraceError naming the setting when the settings make no valid configuration.
void read_allocator_settings(const PyValue* settings, AllocatorConfig& config,
                             std::vector<std::string>& notes);

}  // namespace memgrad
