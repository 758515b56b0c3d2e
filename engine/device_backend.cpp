// Device management for the CUDA backend, or DeviceErrors in a CPU-only build.
//
// The one engine file that knows whether the build has CUDA. It includes only CUDA-free headers
// of the backend (kernels/cuda/cuda_backend.h, device_context.h) and the CUDA memory sources;
// the CUDA runtime itself stays behind them.
#include "engine/device_backend.h"

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/memory.h"
#include "engine/op_support.h"
#include "memgrad_build_config.h"

#if MEMGRAD_WITH_CUDA
#include "allocator/caching_allocator.h"
#include "allocator/cuda_memory.h"
#include "allocator/pinned_host_allocator.h"
#include "allocator/pinned_host_memory.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_context.h"
#endif

namespace memgrad {

namespace {

// A copy into or out of a meta tensor (meta:N): into one there is nothing to copy but its shape;
// out of one there are no values, a DeviceError. Returns whether it handled the copy.
bool copy_meta(const Tensor& dst, const Tensor& src) {
  const Device to = dst.device(), from = src.device();
  if (!to.is_meta() && !from.is_meta()) return false;
  if (from.is_meta() && !to.is_meta()) {
    throw DeviceError(fmt::format("[to] a tensor on {} has a shape but no values, so it cannot "
                                  "be copied to {}: run the program on a real device to see "
                                  "values",
                                  from.str(), to.str()),
                      "to", {from.str(), to.str()});
  }
  return true;
}

}  // namespace

#if MEMGRAD_WITH_CUDA

namespace {

// The pinned host allocator, created on first use and never destroyed (pinned tensors may be
// freed during static destruction). Constructing it makes no CUDA call.
PinnedHostAllocator& pinned_allocator() {
  static PinnedHostAllocator* allocator = [] {
    auto* a = new PinnedHostAllocator(*new PinnedHostMemory());
    a->set_stream_events(&kernels::cuda::host_stream_events());
    return a;
  }();
  return *allocator;
}

}  // namespace

int cuda_device_count() { return kernels::cuda::device_count(); }

void check_cuda_device(int index) {
  const int count = cuda_device_count();
  if (index < 0 || index >= count) {
    throw DeviceError(
        fmt::format("[device] cuda:{} requested but {} CUDA device{} present", index,
                    count == 0 ? "no" : std::to_string(count), count == 1 ? " is" : "s are"),
        "device", {fmt::format("cuda:{}", index)});
  }
}

std::unique_ptr<MemorySource> make_cuda_source(int index) {
  return std::make_unique<CudaMemory>(index);
}

kernels::KernelBackend& detail::kernels_for(Device device) {
  if (device.is_host()) [[likely]]
    return kernels::cpu_backend();
  if (device.is_meta()) return kernels::meta_backend();
  return kernels::cuda::backend(device.index());
}

void attach_device_hooks(Device device, PolicyAllocator& allocator) {
  if (!device.is_cuda()) return;
  if (auto* caching = dynamic_cast<CachingAllocator*>(&allocator)) {
    caching->set_stream_events(&kernels::cuda::stream_events(device.index()));
  }
  kernels::cuda::set_workspace_allocator(device.index(), &allocator);
}

StreamId allocation_stream(Device device) {
  if (!device.is_cuda()) [[likely]]
    return kDefaultStream;
  return kernels::cuda::current_stream(device.index());
}

void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking) {
  const Device to = dst.device(), from = src.device();
  if (copy_meta(dst, src)) return;
  if (to.is_host() && from.is_host()) {
    // Host to host (cpu, sim:N, pinned): all host memory.
    kernels::cpu_backend().copy(detail::operand(dst), detail::operand(src));
    return;
  }
  if (to.is_cuda()) check_cuda_device(to.index());
  if (from.is_cuda()) check_cuda_device(from.index());
  if (to.is_cuda() && from.is_cuda()) {
    kernels::cuda::copy_peer(to.index(), dst.data_ptr(), from.index(), src.data_ptr(),
                             dst.nbytes());
    return;
  }
  // Host <-> device on the device's current stream. Asynchronous only from (or into) pinned
  // memory when asked; the pinned block then records the stream, so it is not reused before
  // the copy has run even if its tensor dies first.
  const int device = to.is_cuda() ? to.index() : from.index();
  const Tensor& host = to.is_cuda() ? src : dst;
  const bool async = non_blocking && storage_is_pinned(host.storage());
  const auto kind =
      to.is_cuda() ? kernels::cuda::CopyKind::HostToDevice : kernels::cuda::CopyKind::DeviceToHost;
  kernels::cuda::copy_bytes(device, dst.data_ptr(), src.data_ptr(), dst.nbytes(), kind, async);
  if (async) {
    const StreamId stream = kernels::cuda::current_stream(device);
    pinned_allocator().record_stream(host.storage().block(),
                                     kernels::cuda::host_stream_key(device, stream));
  }
}

Tensor pin_memory_copy(const Tensor& x) {
  if (!x.device().is_host()) {
    throw DeviceError(fmt::format("[pin_memory] only host tensors can be pinned, got a tensor on "
                                  "{}",
                                  x.device().str()),
                      "pin_memory", {x.device().str()});
  }
  if (storage_is_pinned(x.storage())) return x;
  if (cuda_device_count() == 0) {
    throw DeviceError("[pin_memory] pinned host memory needs a CUDA device, and none is present",
                      "pin_memory");
  }
  auto storage = std::make_shared<Storage>(x.nbytes(), kCPU, pinned_allocator());
  Tensor out(std::make_shared<TensorImpl>(std::move(storage), x.sizes(),
                                          contiguous_strides(x.sizes()), 0, x.dtype()));
  if (x.numel() > 0) kernels::cpu_backend().copy(detail::operand(out), detail::operand(x));
  return out;
}

bool storage_is_pinned(const Storage& storage) {
  return &storage.allocator() == &pinned_allocator();
}

void cuda_synchronize(int index) {
  check_cuda_device(index);
  kernels::cuda::synchronize(index);
}

cuda::DeviceProperties cuda_properties(int index) {
  check_cuda_device(index);
  const kernels::cuda::DeviceProperties& p = kernels::cuda::device_properties(index);
  return {p.name, p.total_memory, p.multi_processor_count, p.major, p.minor};
}

StreamId cuda_current_stream(int index) {
  check_cuda_device(index);
  return kernels::cuda::current_stream(index);
}

void cuda_set_current_stream(int index, StreamId stream) {
  check_cuda_device(index);
  kernels::cuda::set_current_stream(index, stream);
}

StreamId cuda_new_stream(int index) {
  check_cuda_device(index);
  return kernels::cuda::create_stream(index);
}

void cuda_synchronize_stream(int index, StreamId stream) {
  check_cuda_device(index);
  kernels::cuda::synchronize_stream(index, stream);
}

MemoryStats cuda_host_memory_stats() { return pinned_allocator().stats(); }

void cuda_host_empty_cache() { pinned_allocator().empty_cache(); }

bool cuda_allow_tf32() { return kernels::cuda::allow_tf32(); }

void cuda_set_allow_tf32(bool allow) { kernels::cuda::set_allow_tf32(allow); }

void cuda_clear_cublas_workspaces(int index) {
  check_cuda_device(index);
  kernels::cuda::clear_cublas_workspaces(index);
}

size_t cuda_cublas_workspace_size(int index) {
  check_cuda_device(index);
  return kernels::cuda::cublas_workspace_nbytes(index);
}

std::shared_ptr<void> cuda_mark_current_stream(int index) {
  check_cuda_device(index);
  StreamEvents& events = kernels::cuda::stream_events(index);
  return {events.record(kernels::cuda::current_stream(index)),
          [&events](void* event) { events.release(event); }};
}

void cuda_wait_for_mark(int index, const std::shared_ptr<void>& mark) {
  if (mark) kernels::cuda::stream_events(index).synchronize(mark.get());
}

#else

namespace {

[[noreturn]] void no_backend(const char* op) {
  throw DeviceError(fmt::format("[{}] memgrad was built without the CUDA backend (configure with "
                                "-Dcuda=enabled on a machine with nvcc)",
                                op),
                    op);
}

}  // namespace

int cuda_device_count() { return 0; }

void copy_across_devices(const Tensor& dst, const Tensor& src, bool) {
  if (copy_meta(dst, src)) return;
  if (!dst.device().is_host() || !src.device().is_host()) {
    check_cuda_device(dst.device().is_cuda() ? dst.device().index() : src.device().index());
  }
  // Host to host (cpu <-> sim:N): both are host memory.
  kernels::cpu_backend().copy(detail::operand(dst), detail::operand(src));
}

Tensor pin_memory_copy(const Tensor&) {
  throw DeviceError(
      "[pin_memory] pinned host memory needs the CUDA backend (configure with "
      "-Dcuda=enabled on a machine with nvcc)",
      "pin_memory");
}

bool storage_is_pinned(const Storage&) { return false; }

void check_cuda_device(int index) {
  throw DeviceError(
      fmt::format("[device] cuda:{} requested but memgrad was built without the CUDA backend "
                  "(configure with -Dcuda=enabled on a machine with nvcc)",
                  index),
      "device", {fmt::format("cuda:{}", index)});
}

std::unique_ptr<MemorySource> make_cuda_source(int index) {
  check_cuda_device(index);
  return nullptr;
}

kernels::KernelBackend& detail::kernels_for(Device device) {
  if (device.is_meta()) return kernels::meta_backend();
  if (!device.is_host()) check_cuda_device(device.index());
  return kernels::cpu_backend();
}

void attach_device_hooks(Device, PolicyAllocator&) {}

StreamId allocation_stream(Device) { return kDefaultStream; }

void cuda_synchronize(int) { no_backend("cuda.synchronize"); }
cuda::DeviceProperties cuda_properties(int) { no_backend("cuda.get_device_properties"); }
StreamId cuda_current_stream(int) { no_backend("cuda.current_stream"); }
void cuda_set_current_stream(int, StreamId) { no_backend("cuda.set_current_stream"); }
StreamId cuda_new_stream(int) { no_backend("cuda.new_stream"); }
void cuda_synchronize_stream(int, StreamId) { no_backend("cuda.synchronize_stream"); }
MemoryStats cuda_host_memory_stats() { return {}; }
void cuda_host_empty_cache() {}
bool cuda_allow_tf32() { return false; }
void cuda_set_allow_tf32(bool) { no_backend("cuda.set_allow_tf32"); }
void cuda_clear_cublas_workspaces(int) { no_backend("cuda.clear_cublas_workspaces"); }
size_t cuda_cublas_workspace_size(int) { no_backend("cuda.cublas_workspace_size"); }
std::shared_ptr<void> cuda_mark_current_stream(int) { no_backend("cuda.mark_current_stream"); }
void cuda_wait_for_mark(int, const std::shared_ptr<void>&) { no_backend("cuda.wait_for_mark"); }

#endif

}  // namespace memgrad
