// Per-device CUDA state behind opaque ids: streams, the stream events record_stream waits on,
// and the cuBLAS workspace's allocator. CUDA-free, so engine/device_backend.cpp can include it.
//
// Streams cross layers as StreamId (allocator/stream.h). kDefaultStream (0) is each device's
// legacy default stream; create_stream() makes non-blocking streams with process-unique ids
// (they never synchronise implicitly with the default stream, as PyTorch's pool streams). The
// current stream is per thread and per device, like torch.cuda.current_stream(): kernels launch
// on it and the engine allocates on it, so the caching allocator reuses a freed block only on
// the stream it was allocated on (record_stream extends that to other streams).
//
// Memory outside the allocators: each device's CUDA context, the cuBLAS handle, streams,
// events and a 16-byte word for index bounds checks (cudaMalloc'ed once per device). The cuBLAS
// workspace is taken from the allocator installed with set_workspace_allocator and so shows in
// memory_allocated().
#pragma once

#include <cstddef>
#include <cstdint>

#include "allocator/caching_allocator.h"
#include "allocator/policy_allocator.h"
#include "allocator/stream.h"
#include "kernels/cuda/cuda_backend.h"

namespace memgrad::kernels::cuda {

// The calling thread's current stream on `device` (kDefaultStream unless set).
StreamId current_stream(int device);
// Makes `stream` the calling thread's current stream on `device`. Throws CudaError for a
// stream id that does not belong to `device`.
void set_current_stream(int device, StreamId stream);
// Creates a non-blocking stream on `device`; it lives until the process ends.
StreamId create_stream(int device);
// Waits for the work queued on `stream` of `device`.
void synchronize_stream(int device, StreamId stream);

// The events the caching allocator of `device` records on its streams (record_stream).
StreamEvents& stream_events(int device);

// Events for the pinned host allocator, which serves every device: it is handed keys made by
// host_stream_key, which name a device and one of its streams.
StreamEvents& host_stream_events();
StreamId host_stream_key(int device, StreamId stream);

// The allocator cuBLAS workspaces of `device` come from (the engine installs the device's
// allocator; nullptr: cuBLAS keeps its own, outside the statistics). Workspaces already taken
// are returned to the allocator they came from (after waiting for the device).
void set_workspace_allocator(int device, PolicyAllocator* allocator);
// Returns every cuBLAS workspace of `device` to its allocator
// (torch._C._cuda_clearCublasWorkspaces): the next GEMM on a stream takes a new one.
void clear_cublas_workspaces(int device);
// Bytes of one cuBLAS workspace on `device`: CUBLAS_WORKSPACE_CONFIG (":SIZE_KiB:COUNT" pairs)
// when set, else PyTorch's default: 4096 KiB x 8 on Hopper and newer, 4096 KiB x 2 + 16 KiB x 8
// before.
size_t cublas_workspace_nbytes(int device);

// Directions of copy_bytes.
enum class CopyKind : uint8_t { HostToDevice, DeviceToHost };

// Copies `nbytes` between host memory and cuda:`device` on the calling thread's current stream
// of that device (cudaMemcpyAsync). Waits for the copy unless `async` (only safe when the host
// memory is pinned and stays alive until the stream reaches the copy).
void copy_bytes(int device, void* dst, const void* src, size_t nbytes, CopyKind kind, bool async);

// Copies `nbytes` from cuda:`src_device` to cuda:`dst_device`: waits for the source device's
// current stream, copies on the destination's current stream (cudaMemcpyPeerAsync), and waits
// for the copy, so neither side can reuse the memory too early.
void copy_peer(int dst_device, void* dst, int src_device, const void* src, size_t nbytes);

// Whether float32 GEMMs may use TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32;
// false by default: float32 products are computed in float32).
bool allow_tf32();
void set_allow_tf32(bool allow);

}  // namespace memgrad::kernels::cuda
