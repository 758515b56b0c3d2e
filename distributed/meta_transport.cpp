// MetaTransport: collectives that allocate as Gloo or NCCL would and move nothing.
#include "distributed/meta_transport.h"

#include "engine/factories.h"

namespace memgrad::distributed::detail {
namespace {

class MetaTransport final : public Transport {
 public:
  MetaTransport(int size, Backend as, Device device) : size_(size), as_(as), device_(device) {}

  bool local() const override { return as_ == Backend::Gloo && size_ == 1; }
  bool has_reduce_scatter() const override { return as_ == Backend::Nccl; }

  // Every rank called what this one did. On NCCL the descriptions travel through two device
  // tensors (nccl_transport.cpp): this rank's, then everyone's, freed in the opposite order.
  std::vector<int64_t> exchange(const std::vector<int64_t>& mine) override {
    std::vector<int64_t> all;
    all.reserve(mine.size() * static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) all.insert(all.end(), mine.begin(), mine.end());
    if (as_ == Backend::Nccl) {
      const auto k = static_cast<int64_t>(mine.size());
      const Tensor local = empty({k}, TensorOptions(kInt64).with_device(device_));
      const Tensor gathered = empty({k * size_}, TensorOptions(kInt64).with_device(device_));
    }
    return all;
  }
  void all_reduce_sum(void*, size_t, DType) override {}
  void all_gather(void*, const void*, size_t) override {}
  void all_to_all(void*, const void*, size_t) override {}
  void reduce_scatter_sum(void*, const void*, size_t, DType) override {}
  void broadcast(void*, size_t, int) override {}
  // NCCL's barrier is an all-reduce of one float staged on the device.
  void barrier() override {
    if (as_ == Backend::Nccl) {
      const Tensor one = zeros({1}, TensorOptions(kFloat32).with_device(device_));
    }
  }
  const std::vector<PeerInfo>& peers() const override { return peers_; }

 private:
  int size_;
  Backend as_;
  Device device_;
  std::vector<PeerInfo> peers_;
};

}  // namespace

std::unique_ptr<Transport> make_meta_transport(int size, Backend as, Device device) {
  return std::make_unique<MetaTransport>(size, as, device);
}

}  // namespace memgrad::distributed::detail
