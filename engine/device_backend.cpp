// Device management for the CUDA backend, or DeviceErrors in a CPU-only build.
#include "engine/device_backend.h"

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/memory.h"
#include "engine/op_support.h"
#include "memgrad_build_config.h"

#if MEMGRAD_WITH_CUDA
#include "allocator/caching_allocator.h"
#include "allocator/cuda_memory.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_context.h"
#endif

namespace memgrad {

#if MEMGRAD_WITH_CUDA

int cuda_device_count() { return kernels::cuda::device_count(); }

void check_cuda_device(int index) {
  const int count = cuda_device_count();
  if (index >= count) {
    throw DeviceError(fmt::format("[device] cuda:{} requested but {} CUDA device{} present", index,
                                  count == 0 ? "no" : std::to_string(count),
                                  count == 1 ? " is" : "s are"));
  }
}

std::unique_ptr<MemorySource> make_cuda_source(int index) {
  return std::make_unique<CudaMemory>(index);
}

kernels::KernelBackend& detail::kernels_for(Device device) {
  if (device.is_host()) [[likely]] return kernels::cpu_backend();
  return kernels::cuda::backend(device.index());
}

void attach_device_hooks(Device device, Allocator& allocator) {
  if (!device.is_cuda()) return;
  if (auto* caching = dynamic_cast<CachingAllocator*>(&allocator)) {
    caching->set_stream_events(&kernels::cuda::stream_events(device.index()));
  }
}

#else

int cuda_device_count() { return 0; }

void copy_across_devices(const Tensor& dst, const Tensor& src, bool) {
  if (!dst.device().is_host() || !src.device().is_host()) {
    check_cuda_device(dst.device().is_cuda() ? dst.device().index() : src.device().index());
  }
  // Host to host (cpu <-> sim:N): both are host memory.
  kernels::cpu_backend().copy(detail::operand(dst), detail::operand(src));
}

Tensor pin_memory_copy(const Tensor&) {
  throw DeviceError("[pin_memory] pinned host memory needs the CUDA backend (configure with "
                    "-Dcuda=enabled on a machine with nvcc)");
}

bool storage_is_pinned(const Storage&) { return false; }

void check_cuda_device(int index) {
  throw DeviceError(fmt::format(
      "[device] cuda:{} requested but memgrad was built without the CUDA backend "
      "(configure with -Dcuda=enabled on a machine with nvcc)",
      index));
}

std::unique_ptr<MemorySource> make_cuda_source(int index) {
  check_cuda_device(index);
  return nullptr;
}

kernels::KernelBackend& detail::kernels_for(Device device) {
  if (!device.is_host()) check_cuda_device(device.index());
  return kernels::cpu_backend();
}

void attach_device_hooks(Device, Allocator&) {}

#endif

}  // namespace memgrad
