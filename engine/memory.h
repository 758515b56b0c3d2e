// The per-device memory API, with PyTorch's names (torch.cuda.memory_allocated and friends).
//
// Each device has one allocator, created on first use with the options of MEMGRAD_ALLOC_CONF.
// All figures are the allocator's, in bytes:
//   memory_allocated   bytes in blocks held by tensors (rounded block sizes, not numel x size)
//   memory_reserved    bytes the allocator holds from the device: allocated + cached
//   max_memory_*       the peaks since start or the last reset_peak_memory_stats()
// Nothing else is counted: tensor metadata (sizes, strides, autograd nodes) lives on the C++
// heap, and for CUDA the context and library workspaces outside our allocator are not included.
//
// Environment:
//   MEMGRAD_ALLOC_CONF        allocator options for every device ("policy:caching,...")
//   MEMGRAD_CPU_MEMORY_LIMIT  e.g. "256MiB": the CPU becomes a bounded device of that capacity
//   MEMGRAD_SIM_MEMORY        capacity of each simulated device sim:N (default "1GiB")
//   MEMGRAD_META_MEMORY       capacity of each meta device meta:N (default "80GiB")
//   MEMGRAD_TRACE             a file path: every allocator records its trace (allocator/trace.h)
//                             from its creation, and at exit each device's current allocator
//                             writes it there as JSON; with several devices traced, each file is
//                             the path with the device before the extension ("t.json" ->
//                             "t.cpu.json", "t.sim0.json"). "{rank}" in the path becomes the
//                             process's RANK (0 when unset), so each rank of ./memgrad launch
//                             writes its own file. Recording costs host memory per event; a
//                             replaced allocator's trace is not written.
//   MEMGRAD_SNAPSHOT          a file path: every allocator records from its creation, and at
//                             exit each device's memory snapshot (PyTorch's format, see
//                             engine/memory_snapshot.h) is written there: pickle, or JSON for a
//                             ".json" path; several devices and "{rank}" as for MEMGRAD_TRACE.
//                             A device whose allocator was replaced (set_sim_capacity,
//                             set_allocator_config) writes its current allocator's snapshot, or,
//                             when that one recorded nothing, the last replaced one that did.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "allocator/config.h"
#include "allocator/policy_allocator.h"
#include "engine/device.h"

namespace memgrad {

class Tensor;

// The allocator serving `device`, created on first use. Throws DeviceError for a device this
// build or machine does not have, ConfigError for a bad MEMGRAD_ALLOC_CONF.
PolicyAllocator& allocator_for(Device device);

size_t memory_allocated(Device device = kCPU);
size_t max_memory_allocated(Device device = kCPU);
size_t memory_reserved(Device device = kCPU);
size_t max_memory_reserved(Device device = kCPU);
// Every statistic (see allocator/stats.h).
MemoryStats memory_stats(Device device = kCPU);
// Peaks := current values.
void reset_peak_memory_stats(Device device = kCPU);
// Cumulative totals and event counters := 0.
void reset_accumulated_memory_stats(Device device = kCPU);
// Returns cached blocks that hold no tensor to the device; allocated memory is unchanged.
void empty_cache(Device device = kCPU);
// Says what `t`'s block is for the allocator trace (a TraceName: "parameter", "buffer",
// "gradient", ...), under `module` (an interned path: intern_trace_string, nn::Module's
// trace_path()), and keeps the module in the storage, so the optimizer's state and autograd's
// gradient for it are allocated under that module. Only the storage changes when the trace is off.
void name_in_trace(const Tensor& t, const char* module, std::string_view role);

// The table torch.cuda.memory_summary() prints.
std::string memory_summary(Device device = kCPU, bool abbreviated = false);
// (free, total) bytes of the device as its source reports them (cudaMemGetInfo on a GPU).
std::pair<size_t, size_t> mem_get_info(Device device = kCPU);
// Caps what the allocator may reserve at fraction x capacity. Throws ConfigError.
void set_per_process_memory_fraction(double fraction, Device device = kCPU);

// The options the allocator of `device` was built with (MEMGRAD_ALLOC_CONF's, or the last
// set_allocator_config()'s). Allocates: nothing on the device.
AllocatorConfig allocator_config(Device device);

// Replaces the allocator of `device` with a new one built from `config` (e.g. to switch to the
// passthrough policy). Tensors allocated before keep their memory and return it to the
// allocator they came from. Throws ConfigError.
void set_allocator_config(Device device, const AllocatorConfig& config);

// Makes the CPU a bounded simulated device of `nbytes` (0: back to host memory), with a fresh
// allocator. Existing CPU tensors are unaffected. Throws ConfigError.
void set_cpu_memory_limit(size_t nbytes);

// Sets the capacity of the simulated device sim:index, with a fresh allocator. Throws ConfigError.
void set_sim_capacity(int index, size_t nbytes);
// Sets the capacity of the meta device meta:index (up to BoundedMemory::kMaxCapacity, 4 TiB),
// with a fresh allocator. Throws ConfigError.
void set_meta_capacity(int index, size_t nbytes);

// Where the reserved but unallocated bytes of `device` are now: hard fragmentation (free bytes
// fenced by live blocks), soft (free bytes in segments with no live block), other streams; the
// bytes lost to rounding, the largest free block and the largest request that would succeed now
// (allocator/fragmentation.h defines each). hard + soft + stream = reserved - allocated.
FragmentationReport fragmentation(Device device = kCPU);

// ---- memory snapshots, named as PyTorch's torch.cuda.memory functions ----

// Starts recording every allocator event of `device` (clearing earlier ones), keeping the last
// `max_entries` (a ring, as PyTorch's _record_memory_history(max_entries=...)); with `enabled`
// false, stops. Recording costs host memory per event (about 56 bytes), nothing on the device.
void record_memory_history(Device device = kCPU, size_t max_entries = SIZE_MAX,
                           bool enabled = true);
// Number of CUDA devices present (0 without the backend or a GPU).
int cuda_device_count();

// parse_memory_size ("256MiB" -> bytes) lives in allocator/config.h, included above.

}  // namespace memgrad
