// The CUDA runtime API of memgrad (torch.cuda's device, stream and pinned-memory functions).
// CUDA-free: every build has it; without the CUDA backend device_count() is 0, is_available()
// false, host_memory_stats() empty, and the rest throw DeviceError.
//
// Streams are opaque StreamIds (allocator/stream.h). kDefaultStream is each device's default
// stream; new_stream() makes streams that run independently of it. The current stream is per
// thread and per device: kernels launch on it and new CUDA tensors are allocated on it, so the
// caching allocator reuses a freed block only on the stream it was allocated on. A tensor used
// on another stream must be marked with record_stream (PyTorch's rule), or its block may be
// reused while that stream still reads it.
//
// Memory outside memgrad's allocators, never in memory_allocated(): each device's CUDA context
// (hundreds of MiB), the cuBLAS handle, streams and events. The cuBLAS workspace (one per
// stream that ran a GEMM) is taken from the device's allocator and is counted.
#pragma once

#include <cstddef>
#include <string>

#include "allocator/stats.h"
#include "allocator/stream.h"
#include "engine/tensor.h"

namespace memgrad::cuda {

// Number of CUDA devices (0 without the backend, a driver or a GPU).
int device_count();
// Whether at least one CUDA device can be used.
bool is_available();

// Waits for all work queued on cuda:`device` (every stream). Throws DeviceError without it.
void synchronize(int device = 0);

// What cudaGetDeviceProperties reports, in the fields torch.cuda.get_device_properties has.
struct DeviceProperties {
  std::string name;         // e.g. "NVIDIA H100 80GB HBM3"
  size_t total_memory = 0;  // bytes
  int multi_processor_count = 0;
  int major = 0, minor = 0;  // compute capability
};
// Throws DeviceError when cuda:`device` does not exist.
DeviceProperties get_device_properties(int device = 0);

// The calling thread's current stream on cuda:`device` (kDefaultStream unless set).
StreamId current_stream(int device = 0);
// Makes `stream` current for the calling thread on cuda:`device`. Throws for a stream of
// another device.
void set_current_stream(StreamId stream, int device = 0);
// A new stream on cuda:`device`, not synchronising with the default stream (lives until exit).
StreamId new_stream(int device = 0);
// Waits for the work queued on `stream` of cuda:`device`.
void synchronize_stream(StreamId stream, int device = 0);

// Makes `stream` current on cuda:`device` for its scope (torch.cuda.stream(s)).
class StreamGuard {
 public:
  explicit StreamGuard(StreamId stream, int device = 0);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  StreamId previous_;
  int device_;
};

// Marks `t`'s storage as used by `stream` (Tensor.record_stream): when the storage is freed, its
// block is reused only after the work queued on `stream` so far has finished. Allocates
// nothing. Throws DeviceError for a tensor that is not on a CUDA device, and CudaError (as
// set_current_stream) for a stream that is not one of the tensor's device's streams.
void record_stream(const Tensor& t, StreamId stream);

// The pinned host allocator's statistics (torch.cuda.host_memory_stats: allocation, segment,
// allocated_bytes, reserved_bytes in the "all" pool; num_device_alloc/free count the
// cudaHostAlloc/cudaFreeHost calls). Empty without the backend.
MemoryStats host_memory_stats();
// Returns cached pinned blocks to the system (torch._C._host_emptyCache). Pinned tensors that
// are alive keep their memory.
void host_empty_cache();

// Whether float32 matrix products may use TF32 tensor cores (default false, as
// torch.backends.cuda.matmul.allow_tf32).
bool allow_tf32();
void set_allow_tf32(bool allow);

// Returns the cuBLAS workspaces of cuda:`device` to its allocator
// (torch._C._cuda_clearCublasWorkspaces); the next matrix product on a stream takes one again.
void clear_cublas_workspaces(int device = 0);
// Bytes of one cuBLAS workspace on cuda:`device` (CUBLAS_WORKSPACE_CONFIG, or PyTorch's
// default: 32 MiB on Hopper, 8 MiB + 128 KiB before).
size_t cublas_workspace_size(int device = 0);

}  // namespace memgrad::cuda
