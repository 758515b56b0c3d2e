// The engine's one seam to the CUDA backend's device management, so that CUDA-specific code is
// in one file. Without the backend (or without a GPU) each function says so with a DeviceError.
#pragma once

#include <memory>

#include "allocator/memory_source.h"
#include "allocator/policy_allocator.h"
#include "allocator/stream.h"
#include "engine/cuda.h"
#include "engine/device.h"
#include "engine/storage.h"
#include "engine/tensor.h"
#include "kernels/backend.h"

namespace memgrad {

namespace detail {
// The kernel backend computing on `device` (cpu and sim: the CPU backend; cuda:N: the CUDA
// backend, DeviceError without it). Front-end ops reach kernels only through this.
kernels::KernelBackend& kernels_for(Device device);
}  // namespace detail

// Throws DeviceError when cuda:`index` does not exist (or the build has no CUDA backend).
void check_cuda_device(int index);

// The raw memory source of cuda:`index` (cudaMalloc / cudaFree).
std::unique_ptr<MemorySource> make_cuda_source(int index);

// Copies the contiguous `src` into the contiguous `dst` (same shape and dtype) on another
// device: host to host, or through the CUDA backend (asynchronously from pinned memory when
// non_blocking).
void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking);

// A copy of the host tensor `x` in page-locked memory (CUDA builds; DeviceError otherwise).
Tensor pin_memory_copy(const Tensor& x);
// Whether `storage` came from the pinned host allocator.
bool storage_is_pinned(const Storage& storage);

// Connects a freshly created allocator to its device (for CUDA: stream events for
// record_stream, and the cuBLAS workspaces are taken from it). Nothing to do for cpu and sim.
void attach_device_hooks(Device device, PolicyAllocator& allocator);

// The stream a new allocation on `device` is tied to: the calling thread's current stream for
// cuda:N, kDefaultStream for host devices.
StreamId allocation_stream(Device device);

// ---- the CUDA runtime behind engine/cuda.h (DeviceError without the backend) ----
void cuda_synchronize(int index);
cuda::DeviceProperties cuda_properties(int index);
StreamId cuda_current_stream(int index);
void cuda_set_current_stream(int index, StreamId stream);
StreamId cuda_new_stream(int index);
void cuda_synchronize_stream(int index, StreamId stream);
MemoryStats cuda_host_memory_stats();
void cuda_host_empty_cache();
bool cuda_allow_tf32();
void cuda_set_allow_tf32(bool allow);
void cuda_clear_cublas_workspaces(int index);
size_t cuda_cublas_workspace_size(int index);
// An event recorded on cuda:`index`'s current stream after the work queued so far, released
// with its last owner; cuda_wait_for_mark blocks until that work has run (only that work, not
// what is queued after it).
std::shared_ptr<void> cuda_mark_current_stream(int index);
void cuda_wait_for_mark(int index, const std::shared_ptr<void>& mark);

}  // namespace memgrad
