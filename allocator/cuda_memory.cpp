// CudaMemory: cudaMalloc / cudaFree under a guard that makes the source's device current.
#include "allocator/cuda_memory.h"

#include <cuda.h>  // driver API types; the functions come from the runtime (below)
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "allocator/cuda_check.h"

namespace memgrad {

namespace {

// The driver functions of virtual memory management, found through the runtime.
struct DriverVmm {
  PFN_cuDeviceGetAttribute_v2000 device_get_attribute = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 get_granularity = nullptr;
  PFN_cuMemAddressReserve_v10020 address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  PFN_cuGetErrorName_v6000 error_name = nullptr;

  bool complete() const {
    return device_get_attribute && get_granularity && address_reserve && address_free && create &&
           release && map && unmap && set_access && error_name;
  }
};

template <typename Fn>
void find_driver_function(const char* symbol, Fn& fn) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(symbol, &address, 12000, cudaEnableDefault, &found) ==
          cudaSuccess &&
      found == cudaDriverEntryPointSuccess) {
    fn = reinterpret_cast<Fn>(address);
  } else {
    cudaGetLastError();  // a missing symbol is an answer, not an error for later calls
  }
}

const DriverVmm& driver_vmm() {
  static const DriverVmm vmm = [] {
    DriverVmm d;
    find_driver_function("cuDeviceGetAttribute", d.device_get_attribute);
    find_driver_function("cuMemGetAllocationGranularity", d.get_granularity);
    find_driver_function("cuMemAddressReserve", d.address_reserve);
    find_driver_function("cuMemAddressFree", d.address_free);
    find_driver_function("cuMemCreate", d.create);
    find_driver_function("cuMemRelease", d.release);
    find_driver_function("cuMemMap", d.map);
    find_driver_function("cuMemUnmap", d.unmap);
    find_driver_function("cuMemSetAccess", d.set_access);
    find_driver_function("cuGetErrorName", d.error_name);
    return d;
  }();
  return vmm;
}

// Throws CudaError for a failed driver call, naming it and the device.
void check_driver(CUresult status, const char* call, const std::string& where) {
  if (status == CUDA_SUCCESS) return;
  const char* error = "unknown error";
  if (driver_vmm().error_name != nullptr) driver_vmm().error_name(status, &error);
  throw CudaError(fmt::format("[cuda] {} failed: {} ({})", call, error, where), call,
                  static_cast<int>(status));
}

CUmemAllocationProp page_properties(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

}  // namespace

CudaMemory::CudaMemory(int device) : device_(device) {
  DeviceGuard guard(device_);
  size_t free = 0;
  check_cuda(cudaMemGetInfo(&free, &capacity_), "cudaMemGetInfo(&free, &total)", name());
  const DriverVmm& d = driver_vmm();
  int supported = 0;
  if (d.complete() &&
      d.device_get_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                             device_) == CUDA_SUCCESS &&
      supported != 0) {
    const CUmemAllocationProp prop = page_properties(device_);
    size_t granularity = 0;
    if (d.get_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS) {
      vmm_page_ = granularity;
    }
  }
}

CudaMemory::~CudaMemory() = default;

size_t CudaMemory::expansion_page_nbytes() const {
  if (vmm_page_ == 0) return MemorySource::expansion_page_nbytes();  // throws: no support
  return vmm_page_;
}

VirtualRegion CudaMemory::reserve(size_t nbytes) {
  if (vmm_page_ == 0) return MemorySource::reserve(nbytes);  // throws: no support
  CUdeviceptr base = 0;
  const CUresult status = driver_vmm().address_reserve(&base, nbytes, vmm_page_, 0, 0);
  if (status == CUDA_ERROR_OUT_OF_MEMORY) return {};
  check_driver(status, "cuMemAddressReserve(&base, nbytes, page, 0, 0)",
               fmt::format("{}, {} bytes", name(), nbytes));
  return {reinterpret_cast<char*>(base), nbytes};
}

bool CudaMemory::map(const VirtualRegion& region, size_t offset, size_t nbytes) {
  if (vmm_page_ == 0) return MemorySource::map(region, offset, nbytes);  // throws
  const DriverVmm& d = driver_vmm();
  const CUmemAllocationProp prop = page_properties(device_);
  char* const begin = region.base + offset;
  std::lock_guard<std::mutex> lock(pages_mutex_);
  size_t done = 0;
  for (; done < nbytes; done += vmm_page_) {
    CUmemGenericAllocationHandle handle = 0;
    const CUresult created = d.create(&handle, vmm_page_, &prop, 0);
    if (created == CUDA_ERROR_OUT_OF_MEMORY) break;
    check_driver(created, "cuMemCreate(&handle, page, &prop, 0)", name());
    const CUresult mapped =
        d.map(reinterpret_cast<CUdeviceptr>(begin + done), vmm_page_, 0, handle, 0);
    if (mapped != CUDA_SUCCESS) {
      d.release(handle);
      check_driver(mapped, "cuMemMap(address, page, 0, handle, 0)", name());
    }
    pages_[begin + done] = handle;
  }
  if (done < nbytes) {  // out of memory part way: give back what this call mapped
    unmap_pages(begin, done);
    return false;
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  check_driver(d.set_access(reinterpret_cast<CUdeviceptr>(begin), nbytes, &access, 1),
               "cuMemSetAccess(address, nbytes, &access, 1)",
               fmt::format("{}, {} bytes", name(), nbytes));
  return true;
}

void CudaMemory::unmap(const VirtualRegion& region, size_t offset, size_t nbytes) {
  if (vmm_page_ == 0) return MemorySource::unmap(region, offset, nbytes);  // throws
  // Work queued on the device may still use the pages (as cudaFree waits for it, so must we).
  // cudaDeviceSynchronize waits for the calling thread's current device only, which is not this
  // source's device when cuda:N (N > 0) is freed from a thread whose current device is cuda:0:
  // the guard makes it this device's.
  DeviceGuard guard(device_);
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize()", name());
  std::lock_guard<std::mutex> lock(pages_mutex_);
  unmap_pages(region.base + offset, nbytes);
}

// Requires pages_mutex_.
void CudaMemory::unmap_pages(char* begin, size_t nbytes) {
  const DriverVmm& d = driver_vmm();
  for (size_t at = 0; at < nbytes; at += vmm_page_) {
    const auto it = pages_.find(begin + at);
    if (it == pages_.end()) continue;
    check_driver(d.unmap(reinterpret_cast<CUdeviceptr>(it->first), vmm_page_),
                 "cuMemUnmap(address, page)", name());
    check_driver(d.release(it->second), "cuMemRelease(handle)", name());
    pages_.erase(it);
  }
}

void CudaMemory::release(const VirtualRegion& region) {
  if (vmm_page_ == 0) return MemorySource::release(region);  // throws
  if (region.base == nullptr) return;
  check_driver(driver_vmm().address_free(reinterpret_cast<CUdeviceptr>(region.base), region.nbytes),
               "cuMemAddressFree(base, nbytes)",
               fmt::format("{}, {} bytes", name(), region.nbytes));
}

void* CudaMemory::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  DeviceGuard guard(device_);
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, nbytes);
  if (status == cudaErrorMemoryAllocation) {
    // cudaMalloc leaves its error as the thread's last error: clear it so the next kernel
    // launch check does not report it.
    cudaGetLastError();
    return nullptr;
  }
  check_cuda(status, "cudaMalloc(&ptr, nbytes)", fmt::format("{}, {} bytes", name(), nbytes));
  return ptr;
}

void CudaMemory::free(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  DeviceGuard guard(device_);
  check_cuda(cudaFree(ptr), "cudaFree(ptr)", fmt::format("{}, {} bytes", name(), nbytes));
}

size_t CudaMemory::free_bytes() const {
  DeviceGuard guard(device_);
  size_t free = 0, total = 0;
  check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo(&free, &total)", name());
  return free;
}

std::string CudaMemory::name() const { return fmt::format("cuda:{}", device_); }

}  // namespace memgrad
