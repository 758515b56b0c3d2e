// tcp_payload_bytes_sent: what this process has sent over TCP, as the kernel counts it.
//
// Kept apart from the Gloo transport: <linux/tcp.h> (whose tcp_info has tcpi_bytes_sent, since
// Linux 4.19) and the <netinet/tcp.h> that Gloo's headers pull in cannot be included together.
#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "distributed/gloo_transport.h"

namespace memgrad::distributed::detail {
namespace {

// The peer's port of a connected TCP socket, or -1.
int peer_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return -1;
}

}  // namespace

uint64_t tcp_payload_bytes_sent(int skip_port) {
  uint64_t total = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  const int dir_fd = dirfd(dir);
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dir_fd) continue;
    int type = 0;
    socklen_t len = sizeof(type);
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
        type != SOCK_STREAM) {
      continue;  // not a socket, or not a stream socket
    }
    tcp_info info{};
    len = sizeof(info);
    if (getsockopt(static_cast<int>(fd), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) continue;
    if (skip_port != 0 && peer_port(static_cast<int>(fd)) == skip_port) continue;
    // Written by this process: sent once, or still in the send queue (a collective returns once
    // its writes are in the kernel's buffer, before the peer's window lets them all out).
    total += info.tcpi_bytes_sent - info.tcpi_bytes_retrans + info.tcpi_notsent_bytes;
  }
  closedir(dir);
  return total;
}

}  // namespace memgrad::distributed::detail
