// The Gloo transport (CPU tensors) and the local one (a group of one rank, no engine needed).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "distributed/store.h"
#include "distributed/transport.h"

namespace memgrad::distributed::detail {

// Connects this rank to every other over Gloo's TCP transport, meeting them in `store` under
// `prefix`. The interface is GLOO_SOCKET_IFNAME's when set; otherwise loopback for a file store
// (one host) and this host's name for a Redis store (several hosts). Throws TransportFailure
// with Gloo's message when the connections cannot be made within `timeout`, DistributedError
// when the build has no Gloo. Allocates: host memory only (Gloo's connections and their buffers).
std::unique_ptr<Transport> make_gloo_transport(int rank, int size, const Store& store,
                                               const std::string& prefix,
                                               std::chrono::milliseconds timeout,
                                               std::vector<PeerInfo> peers);

// A group of one: every collective is a local copy, or nothing.
std::unique_ptr<Transport> make_local_transport();

// The TCP payload this process has written to its connections (Linux's tcpi_bytes_sent less
// tcpi_bytes_retrans, plus tcpi_notsent_bytes, what still waits in the send queue; summed over
// its TCP sockets), leaving out the connection to `skip_port` (the Redis store's; 0 skips none).
uint64_t tcp_payload_bytes_sent(int skip_port);

}  // namespace memgrad::distributed::detail
