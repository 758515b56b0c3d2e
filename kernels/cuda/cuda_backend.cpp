// The per-device backend instances and device-wide synchronisation.
#include "kernels/cuda/cuda_backend.h"

#include <array>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "allocator/cuda_check.h"

namespace memgrad::kernels::cuda {
namespace {

constexpr int kMaxDevices = 64;

}  // namespace

KernelBackend& backend(int device) {
  static std::mutex mutex;
  static auto* backends = new std::array<std::unique_ptr<CudaBackend>, kMaxDevices>();  // immortal
  if (device < 0 || device >= kMaxDevices) {
    throw CudaError(fmt::format("[cuda] device index {} out of range", device), "backend",
                    static_cast<int>(cudaErrorInvalidDevice));
  }
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*backends)[static_cast<size_t>(device)];
  if (!slot) slot = std::make_unique<CudaBackend>(device);
  return *slot;
}

void synchronize(int device) {
  DeviceGuard guard(device);
  MEMGRAD_CUDA_CHECK(cudaDeviceSynchronize());
}

void CudaBackend::synchronize() { cuda::synchronize(device_); }

}  // namespace memgrad::kernels::cuda
