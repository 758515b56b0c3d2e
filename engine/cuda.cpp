// memgrad::cuda: thin wrappers over the device seam (engine/device_backend.h), which answers
// with DeviceError in builds without the CUDA backend.
#include "engine/cuda.h"

#include <fmt/format.h>

#include "engine/device_backend.h"
#include "engine/error.h"
#include "engine/memory.h"
#include "engine/storage.h"

namespace memgrad::cuda {

int device_count() { return cuda_device_count(); }

bool is_available() { return device_count() > 0; }

void synchronize(int device) { cuda_synchronize(device); }

DeviceProperties get_device_properties(int device) { return cuda_properties(device); }

StreamId current_stream(int device) { return cuda_current_stream(device); }

void set_current_stream(StreamId stream, int device) { cuda_set_current_stream(device, stream); }

StreamId new_stream(int device) { return cuda_new_stream(device); }

void synchronize_stream(StreamId stream, int device) { cuda_synchronize_stream(device, stream); }

StreamGuard::StreamGuard(StreamId stream, int device)
    : previous_(current_stream(device)), device_(device) {
  set_current_stream(stream, device);
}

StreamGuard::~StreamGuard() {
  // Restoring a stream that was current a moment ago cannot fail.
  cuda_set_current_stream(device_, previous_);
}

void record_stream(const Tensor& t, StreamId stream) {
  if (!t.defined() || !t.device().is_cuda()) {
    throw DeviceError(fmt::format("[record_stream] expected a CUDA tensor, got {}",
                                  t.defined() ? t.device().str() : "an undefined tensor"),
                      "record_stream", {t.defined() ? t.device().str() : "undefined"});
  }
  // The event on `stream` is recorded when the storage is freed, in its destructor, where a
  // stream of another device (or no stream at all) would throw and end the program: check the
  // stream here, where the error can reach the caller. Making it current validates it, and the
  // guard puts the previous stream back.
  { const StreamGuard check(stream, t.device().index()); }
  t.storage().allocator().record_stream(t.storage().block(), stream);
}

MemoryStats host_memory_stats() { return cuda_host_memory_stats(); }

void host_empty_cache() { cuda_host_empty_cache(); }

bool allow_tf32() { return cuda_allow_tf32(); }

void set_allow_tf32(bool allow) { cuda_set_allow_tf32(allow); }

void clear_cublas_workspaces(int device) { cuda_clear_cublas_workspaces(device); }

size_t cublas_workspace_size(int device) { return cuda_cublas_workspace_size(device); }

}  // namespace memgrad::cuda
