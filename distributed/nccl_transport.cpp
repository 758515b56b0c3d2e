// NcclTransport: NCCL's collectives for the process group; in a build without NCCL (no CUDA, or
// no nccl.h), only the error that says so.
#include "distributed/nccl_transport.h"

#include <cstring>

#include <fmt/format.h>

#include "distributed/error.h"
#include "engine/factories.h"
#include "engine/tensor.h"
#include "memgrad_build_config.h"

#if MEMGRAD_WITH_NCCL
#include "kernels/cuda/nccl.h"
#endif

namespace memgrad::distributed::detail {
namespace {

#if MEMGRAD_WITH_NCCL

using kernels::cuda::NcclDType;

NcclDType nccl_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return NcclDType::Float32;
    case DType::Float64: return NcclDType::Float64;
    case DType::Float16: return NcclDType::Float16;
    case DType::BFloat16: return NcclDType::BFloat16;
    case DType::Int64: return NcclDType::Int64;
    default: break;
  }
  throw DistributedError(fmt::format("[all_reduce] NCCL cannot sum {} tensors", dtype_name(dtype)),
                         "all_reduce", -1);
}

std::string to_hex(const std::string& bytes) {
  std::string hex;
  for (unsigned char c : bytes) hex += fmt::format("{:02x}", c);
  return hex;
}

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

class NcclTransport final : public Transport {
 public:
  NcclTransport(int rank, int size, int local_rank, Store* store, const std::string& prefix,
                std::vector<PeerInfo> peers, std::chrono::milliseconds timeout)
      : device_(DeviceType::CUDA, local_rank), peers_(std::move(peers)), size_(size), rank_(rank) {
    std::string id;
    guarded([&] {
      if (rank == 0) {
        id = kernels::cuda::nccl_unique_id();
        if (store != nullptr) store->set(prefix + "/nccl_id", to_hex(id));
      } else {
        id = from_hex(store->get(prefix + "/nccl_id", timeout));
      }
      comm_ =
          std::make_unique<kernels::cuda::NcclCommunicator>(id, rank, size, local_rank, timeout);
    });
  }

  // The call descriptions travel through a staging tensor on the device (from its allocator):
  // NCCL moves device memory only.
  std::vector<int64_t> exchange(const std::vector<int64_t>& mine) override {
    const auto k = static_cast<int64_t>(mine.size());
    Tensor host = empty({k}, TensorOptions(kInt64));
    std::memcpy(host.data_ptr(), mine.data(), mine.size() * sizeof(int64_t));
    const Tensor local = host.to(device_);
    const Tensor all = empty({k * size_}, TensorOptions(kInt64).with_device(device_));
    guarded([&] { comm_->all_gather(all.data_ptr(), local.data_ptr(), mine.size() * 8); });
    const Tensor back = all.to(kCPU);
    const auto* values = static_cast<const int64_t*>(back.data_ptr());
    return std::vector<int64_t>(values, values + k * size_);
  }

  void all_reduce_sum(void* data, size_t count, DType dtype) override {
    guarded([&] { comm_->all_reduce_sum(data, count, nccl_type(dtype)); });
  }
  void all_gather(void* out, const void* in, size_t in_bytes) override {
    const char* src = in != nullptr ? static_cast<const char*>(in) : nullptr;
    guarded([&] {
      // In place: this rank's piece already sits at out + rank x in_bytes, which NCCL accepts.
      comm_->all_gather(
          out, src != nullptr ? src : static_cast<const char*>(out) + offset(in_bytes), in_bytes);
    });
  }
  void all_to_all(void*, const void*, size_t) override {
    throw DistributedError("[reduce_scatter] the NCCL transport reduce-scatters itself",
                           "reduce_scatter", -1);
  }
  bool has_reduce_scatter() const override { return true; }
  void reduce_scatter_sum(void* out, const void* in, size_t count, DType dtype) override {
    guarded([&] { comm_->reduce_scatter_sum(out, in, count, nccl_type(dtype)); });
  }
  void broadcast(void* data, size_t nbytes, int root) override {
    guarded([&] { comm_->broadcast(data, nbytes, root); });
  }
  // An all-reduce of one float through a staging scalar on the device.
  void barrier() override {
    const Tensor one = zeros({1}, TensorOptions(kFloat32).with_device(device_));
    guarded([&] { comm_->all_reduce_sum(one.data_ptr(), 1, NcclDType::Float32); });
  }
  const std::vector<PeerInfo>& peers() const override { return peers_; }

 private:
  size_t offset(size_t in_bytes) const { return in_bytes * static_cast<size_t>(rank_); }

  template <typename F>
  void guarded(F&& body) {
    try {
      body();
    } catch (const DistributedError&) {
      throw;
    } catch (const Error& e) {
      throw TransportFailure(fmt::format("NCCL: {}", e.what()));
    }
  }

  Device device_;
  std::vector<PeerInfo> peers_;
  int size_;
  int rank_;
  std::unique_ptr<kernels::cuda::NcclCommunicator> comm_;
};

#endif

}  // namespace

std::unique_ptr<Transport> make_nccl_transport(int rank, int size, int local_rank, Store* store,
                                               const std::string& prefix,
                                               std::vector<PeerInfo> peers,
                                               std::chrono::milliseconds timeout) {
#if MEMGRAD_WITH_NCCL
  if (size > 1 && store == nullptr) {
    throw DistributedError(
        "[init_process_group] NCCL ranks need a store to share their "
        "communicator's id",
        "init_process_group", rank);
  }
  return std::make_unique<NcclTransport>(rank, size, local_rank, store, prefix, std::move(peers),
                                         timeout);
#else
  (void)size;
  (void)local_rank;
  (void)store;
  (void)prefix;
  (void)peers;
  (void)timeout;
  throw DistributedError(MEMGRAD_WITH_CUDA
                             ? "[init_process_group] the nccl backend needs NCCL's header, which "
                               "this CUDA build did not find (nccl.h in the CUDA toolkit's "
                               "include/ or from libnccl-dev; configure again once it is there)"
                             : "[init_process_group] the nccl backend needs the CUDA build "
                               "(-Dcuda=enabled, ./memgrad test --cuda)",
                         "init_process_group", rank);
#endif
}

}  // namespace memgrad::distributed::detail
