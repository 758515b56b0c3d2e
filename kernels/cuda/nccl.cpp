// NCCL loaded at first use (see nccl.h): the few functions memgrad calls, and the waits that turn
// a dead peer into an error.
#include "kernels/cuda/nccl.h"

#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "allocator/cuda_check.h"
#include "kernels/cuda/cuda_handles.h"

namespace memgrad::kernels::cuda {
namespace {

struct NcclApi {
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommGetAsyncError) get_async_error = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
};

template <typename Fn>
void find(void* library, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(library, name));
  if (fn == nullptr)
    throw CudaError(fmt::format("[nccl] libnccl has no function {}", name), "dlsym", 0);
}

NcclApi load() {
  const std::string soname = fmt::format("libnccl.so.{}", NCCL_MAJOR);
  void* library = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef MEMGRAD_CUDA_LIBDIR
  if (library == nullptr) {
    library =
        dlopen((std::string(MEMGRAD_CUDA_LIBDIR) + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
  }
#endif
  if (library == nullptr) {
    const char* why = dlerror();
    throw CudaError(fmt::format("[nccl] cannot load {}: {} (is the CUDA toolkit's library folder "
                                "on LD_LIBRARY_PATH?)",
                                soname, why != nullptr ? why : "unknown error"),
                    "dlopen", 0);
  }
  NcclApi api;  // the library stays loaded: the process keeps using it
  find(library, "ncclGetUniqueId", api.get_unique_id);
  find(library, "ncclCommInitRank", api.comm_init_rank);
  find(library, "ncclCommDestroy", api.comm_destroy);
  find(library, "ncclCommAbort", api.comm_abort);
  find(library, "ncclCommGetAsyncError", api.get_async_error);
  find(library, "ncclGetErrorString", api.error_string);
  find(library, "ncclAllReduce", api.all_reduce);
  find(library, "ncclReduceScatter", api.reduce_scatter);
  find(library, "ncclAllGather", api.all_gather);
  find(library, "ncclBroadcast", api.broadcast);
  return api;
}

const NcclApi& api() {
  static const NcclApi loaded = load();
  return loaded;
}

void check(ncclResult_t result, const char* call) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  throw CudaError(fmt::format("[nccl] {} failed: {}", call, api().error_string(result)), call,
                  static_cast<int>(result));
}

ncclDataType_t to_nccl(NcclDType type) {
  switch (type) {
    case NcclDType::Float32: return ncclFloat32;
    case NcclDType::Float64: return ncclFloat64;
    case NcclDType::Float16: return ncclFloat16;
    case NcclDType::BFloat16: return ncclBfloat16;
    case NcclDType::Int64: return ncclInt64;
    case NcclDType::Byte: return ncclUint8;
  }
  return ncclUint8;
}

ncclComm_t comm_of(void* comm) { return static_cast<ncclComm_t>(comm); }

}  // namespace

std::string nccl_unique_id() {
  ncclUniqueId id;
  check(api().get_unique_id(&id), "ncclGetUniqueId");
  return std::string(id.internal, NCCL_UNIQUE_ID_BYTES);
}

NcclCommunicator::NcclCommunicator(const std::string& unique_id, int rank, int size, int device,
                                   std::chrono::milliseconds timeout)
    : device_(device), timeout_(timeout) {
  if (unique_id.size() != NCCL_UNIQUE_ID_BYTES) {
    throw CudaError(fmt::format("[nccl] a unique id has {} bytes, got {}", NCCL_UNIQUE_ID_BYTES,
                                unique_id.size()),
                    "ncclCommInitRank", 0);
  }
  ncclUniqueId id;
  std::copy(unique_id.begin(), unique_id.end(), id.internal);
  DeviceGuard guard(device);
  ncclComm_t comm = nullptr;
  check(api().comm_init_rank(&comm, size, id, rank), "ncclCommInitRank");
  comm_ = comm;
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr || aborted_) return;  // ncclCommAbort already freed an aborted one
  // No DeviceGuard here: it throws CudaError when cudaGetDevice or cudaSetDevice fails (a
  // runtime unloading at exit, a device left in a sticky error state), and an exception leaving
  // a destructor ends the program. The device is made current by hand instead; when that fails
  // the communicator is left to the process's end rather than destroyed on another device.
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  if (previous != device_ && cudaSetDevice(device_) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  api().comm_destroy(comm_of(comm_));  // its error, if any, has nowhere to go
  if (previous != device_) cudaSetDevice(previous);
}

void NcclCommunicator::wait(const char* what) {
  cudaStream_t stream = current_cuda_stream(device_);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    const cudaError_t state = cudaStreamQuery(stream);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) check_cuda(state, "cudaStreamQuery", what);
    ncclResult_t async = ncclSuccess;
    api().get_async_error(comm_of(comm_), &async);
    const bool late = std::chrono::steady_clock::now() > deadline;
    if ((async != ncclSuccess && async != ncclInProgress) || late) {
      api().comm_abort(comm_of(comm_));
      aborted_ = true;
      throw CudaError(late ? fmt::format("[nccl] {} did not complete within {} ms (a peer died or "
                                         "is stuck); the communicator was aborted",
                                         what, timeout_.count())
                           : fmt::format("[nccl] {} failed: {}", what, api().error_string(async)),
                      what, static_cast<int>(async));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void NcclCommunicator::all_reduce_sum(void* data, size_t count, NcclDType type) {
  DeviceGuard guard(device_);
  check(api().all_reduce(data, data, count, to_nccl(type), ncclSum, comm_of(comm_),
                         current_cuda_stream(device_)),
        "ncclAllReduce");
  wait("ncclAllReduce");
}

void NcclCommunicator::reduce_scatter_sum(void* out, const void* in, size_t count, NcclDType type) {
  DeviceGuard guard(device_);
  check(api().reduce_scatter(in, out, count, to_nccl(type), ncclSum, comm_of(comm_),
                             current_cuda_stream(device_)),
        "ncclReduceScatter");
  wait("ncclReduceScatter");
}

void NcclCommunicator::all_gather(void* out, const void* in, size_t in_bytes) {
  DeviceGuard guard(device_);
  check(
      api().all_gather(in, out, in_bytes, ncclUint8, comm_of(comm_), current_cuda_stream(device_)),
      "ncclAllGather");
  wait("ncclAllGather");
}

void NcclCommunicator::broadcast(void* data, size_t nbytes, int root) {
  DeviceGuard guard(device_);
  check(api().broadcast(data, data, nbytes, ncclUint8, root, comm_of(comm_),
                        current_cuda_stream(device_)),
        "ncclBroadcast");
  wait("ncclBroadcast");
}

}  // namespace memgrad::kernels::cuda
