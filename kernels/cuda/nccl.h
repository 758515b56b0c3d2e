// NCCL, the collective engine of GPU ranks, on raw device buffers. CUDA-free, so the engine's
// process group can include it; compiled in the CUDA build only.
//
// libnccl is loaded with dlopen at the first communicator, as cuBLAS is (cublas_api.h): a program
// that never makes a NCCL process group does not map it. Every operation is queued on the
// calling thread's current stream of the communicator's device and then waited for, polling the
// stream and NCCL's asynchronous error: when a peer dies NCCL's kernels never finish, so a wait
// longer than the timeout aborts the communicator (ncclCommAbort) and throws CudaError, instead of
// hanging as a plain stream synchronisation would. NCCL's own device memory (its channels and
// buffers, tens of MiB per communicator) comes from cudaMalloc, outside memgrad's allocator.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace memgrad::kernels::cuda {

enum class NcclDType : uint8_t { Float32, Float64, Float16, BFloat16, Int64, Byte };

// A fresh ncclUniqueId (rank 0 makes it; the others read it from the store), as its bytes.
// Throws CudaError when libnccl cannot be loaded.
std::string nccl_unique_id();

class NcclCommunicator {
 public:
  // Joins communicator `unique_id` as `rank` of `size` on cuda:`device` (ncclCommInitRank).
  // Throws CudaError with NCCL's message.
  NcclCommunicator(const std::string& unique_id, int rank, int size, int device,
                   std::chrono::milliseconds timeout);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // In place: `count` elements at `data` summed over ranks.
  void all_reduce_sum(void* data, size_t count, NcclDType type);
  // count x size elements at `in` summed over ranks; this rank's `count` into `out`.
  void reduce_scatter_sum(void* out, const void* in, size_t count, NcclDType type);
  // `in_bytes` of every rank into `out` in rank order (in may be out + rank x in_bytes).
  void all_gather(void* out, const void* in, size_t in_bytes);
  void broadcast(void* data, size_t nbytes, int root);

 private:
  // Waits for the queued operation `what`; aborts and throws on an NCCL error or the timeout.
  void wait(const char* what);

  void* comm_ = nullptr;  // ncclComm_t
  int device_;
  std::chrono::milliseconds timeout_;
  bool aborted_ = false;
};

}  // namespace memgrad::kernels::cuda
