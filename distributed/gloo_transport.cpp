// GlooTransport: memgrad's raw collectives over Gloo's TCP transport, on two full meshes of
// connections. The sums, gathers and all-to-alls that carry a step's data (and the call checks,
// gathers of a few words) run as rings on the pairs of one mesh in Gloo's synchronous mode, the
// calling thread reading its own sockets (GlooRing, gloo_ring.h: one wake-up per message where
// Gloo's asynchronous mode takes two, half the time of gloo::allreduce between a training step's
// computations on a 2-vCPU machine); broadcast and barrier run on the other through Gloo's
// functional API (gloo::broadcast, gloo::barrier), each call with its own tag so that the slots
// of consecutive collectives never mix. Gloo throws gloo::Exception subclasses (IoException when
// a peer closed its connection or a read or write timed out); they become TransportFailure here,
// and the ProcessGroup names the ranks that are gone.
#include "distributed/gloo_transport.h"

#include <signal.h>

#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "distributed/error.h"
#include "distributed/rendezvous_env.h"
#include "distributed/store_impl.h"

#if MEMGRAD_WITH_GLOO
#include "distributed/gloo_ring.h"

#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>
#endif

namespace memgrad::distributed::detail {
namespace {

class LocalTransport final : public Transport {
 public:
  bool local() const override { return true; }
  std::vector<int64_t> exchange(const std::vector<int64_t>& mine) override { return mine; }
  void all_reduce_sum(void*, size_t, DType) override {}
  void all_gather(void* out, const void* in, size_t in_bytes) override {
    if (in != nullptr && in_bytes > 0) std::memmove(out, in, in_bytes);
  }
  void all_to_all(void* out, const void* in, size_t piece_bytes) override {
    if (piece_bytes > 0) std::memmove(out, in, piece_bytes);
  }
  void broadcast(void*, size_t, int) override {}
  void barrier() override {}
  const std::vector<PeerInfo>& peers() const override { return peers_; }

 private:
  std::vector<PeerInfo> peers_;
};

#if MEMGRAD_WITH_GLOO

// A write to the socket of a peer that has exited raises SIGPIPE, whose default action ends this
// rank without a word. Ignored, the write fails with EPIPE, Gloo throws IoException and the
// ProcessGroup names the peer (Python, so PyTorch, ignores SIGPIPE from startup). A handler the
// program installed is left as it is.
void ignore_default_sigpipe() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, nullptr);
  }
}

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// Gloo has no bfloat16: c = a + b element by element, added in float and rounded to nearest even
// (what PyTorch's Gloo backend does with c10::BFloat16).
void sum_bfloat16(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<BFloat16*>(c);
  const auto* x = static_cast<const BFloat16*>(a);
  const auto* y = static_cast<const BFloat16*>(b);
  for (size_t i = 0; i < n; ++i) {
    out[i] = float_to_bfloat16(bfloat16_to_float(x[i]) + bfloat16_to_float(y[i]));
  }
}

ReduceFn sum_function(DType dtype) {
  switch (dtype) {
    case DType::Float32: return &gloo::sum<float>;
    case DType::Float64: return &gloo::sum<double>;
    case DType::Float16: return &gloo::sum<gloo::float16>;
    case DType::BFloat16: return &sum_bfloat16;
    case DType::Int64: return &gloo::sum<int64_t>;
    default: break;
  }
  throw DistributedError(fmt::format("[all_reduce] Gloo cannot sum {} tensors", dtype_name(dtype)),
                         "all_reduce", -1);
}

class GlooTransport final : public Transport {
 public:
  GlooTransport(int rank, int size, const Store& store, const std::string& prefix,
                std::chrono::milliseconds timeout, std::vector<PeerInfo> peers)
      : store_(store.impl()),
        prefix_store_(std::make_unique<gloo::rendezvous::PrefixStore>(prefix, *store_->store)),
        timeout_(timeout),
        peers_(std::move(peers)) {
    ignore_default_sigpipe();
    gloo::transport::tcp::attr attr;
    if (const auto iface = env_string("GLOO_SOCKET_IFNAME")) {
      attr.iface = *iface;
    } else if (store_->redis_port == 0) {
      attr.hostname = "127.0.0.1";  // a file store: one host
    }                               // else: Gloo uses this host's name
    guarded([&] {
      auto device = gloo::transport::tcp::CreateDevice(attr);
      context_ = std::make_shared<gloo::rendezvous::Context>(rank, size);
      context_->setTimeout(timeout_);
      context_->connectFullMesh(*prefix_store_, device);
      auto ring_context = std::make_shared<gloo::rendezvous::Context>(rank, size);
      ring_context->setTimeout(timeout_);
      gloo::rendezvous::PrefixStore ring_store("ring", *prefix_store_);
      ring_context->connectFullMesh(ring_store, device);
      ring_ = std::make_unique<GlooRing>(std::move(ring_context));
    });
    baseline_ = tcp_payload_bytes_sent(store_->redis_port);
  }

  std::vector<int64_t> exchange(const std::vector<int64_t>& mine) override {
    std::vector<int64_t> all(mine.size() * static_cast<size_t>(context_->size));
    all_gather(all.data(), mine.data(), mine.size() * sizeof(int64_t));
    return all;
  }

  void all_reduce_sum(void* data, size_t count, DType dtype) override {
    const ReduceFn fn = sum_function(dtype);
    guarded([&] { ring_->all_reduce(data, count, element_size(dtype), fn); });
  }

  void all_gather(void* out, const void* in, size_t in_bytes) override {
    if (in != nullptr && in_bytes > 0) {
      std::memmove(static_cast<char*>(out) + in_bytes * static_cast<size_t>(context_->rank), in,
                   in_bytes);
    }
    guarded([&] { ring_->all_gather(out, in_bytes); });
  }

  void all_to_all(void* out, const void* in, size_t piece_bytes) override {
    guarded([&] { ring_->all_to_all(out, in, piece_bytes); });
  }

  void broadcast(void* data, size_t nbytes, int root) override {
    guarded([&] {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(static_cast<char*>(data), nbytes);
      opts.setRoot(root);
      opts.setTag(next_tag());
      opts.setTimeout(timeout_);
      gloo::broadcast(opts);
    });
  }

  void barrier() override {
    guarded([&] {
      gloo::BarrierOptions opts(context_);
      opts.setTag(next_tag());
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    });
  }

  std::optional<uint64_t> wire_bytes_sent() const override {
    return tcp_payload_bytes_sent(store_->redis_port) - baseline_;
  }
  const std::vector<PeerInfo>& peers() const override { return peers_; }

 private:
  template <typename F>
  void guarded(F&& body) {
    try {
      body();
    } catch (const DistributedError&) {
      throw;
    } catch (const std::exception& e) {
      throw TransportFailure(fmt::format("Gloo: {}", e.what()));
    }
  }

  uint32_t next_tag() { return tag_++; }

  std::shared_ptr<Store::Impl> store_;  // the Gloo store outlives the prefix store over it
  std::unique_ptr<gloo::rendezvous::PrefixStore> prefix_store_;
  std::shared_ptr<gloo::rendezvous::Context> context_;  // broadcast and barrier
  std::unique_ptr<GlooRing> ring_;                      // the rest, on their own connections
  std::chrono::milliseconds timeout_;
  std::vector<PeerInfo> peers_;
  uint32_t tag_ = 0;
  uint64_t baseline_ = 0;  // bytes sent by this process before the group was made
};

#endif

}  // namespace

void Transport::reduce_scatter_sum(void*, const void*, size_t, DType) {
  throw DistributedError("[reduce_scatter] this transport has no reduce-scatter of its own",
                         "reduce_scatter", -1);
}

std::unique_ptr<Transport> make_gloo_transport(int rank, int size, const Store& store,
                                               const std::string& prefix,
                                               std::chrono::milliseconds timeout,
                                               std::vector<PeerInfo> peers) {
#if MEMGRAD_WITH_GLOO
  return std::make_unique<GlooTransport>(rank, size, store, prefix, timeout, std::move(peers));
#else
  (void)rank;
  (void)size;
  (void)store;
  (void)prefix;
  (void)timeout;
  (void)peers;
  throw DistributedError(
      "[init_process_group] the gloo backend needs Gloo, and this build has "
      "none (install libgloo-dev and configure the build again)",
      "init_process_group", -1);
#endif
}

std::unique_ptr<Transport> make_local_transport() { return std::make_unique<LocalTransport>(); }

}  // namespace memgrad::distributed::detail
