// Store: the key-value store ranks meet in before any collective (rendezvous), as in torchrun.
//
// Two of Gloo's stores, never a home-made one:
//   file   a folder every rank can write (one host, or a shared file system): one file per key;
//   redis  a redis-server every host can reach (several hosts): Debian's redis-server, addressed
//          by MASTER_ADDR and MASTER_PORT.
// Each rank writes its transport address under a key of its own and reads the others', then the
// ranks connect to one another directly; the store carries no tensor data and no device memory.
// A store keeps its keys: a new run needs a fresh folder (./memgrad launch makes one) or another
// MEMGRAD_RUN_ID (the prefix of every key memgrad writes).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace memgrad::distributed {

class Store {
 public:
  // Gloo's file store in `path` (created when missing). Throws DistributedError when the build
  // has no Gloo or the folder cannot be created.
  static Store file(const std::string& path);
  // Gloo's Redis store on host:port. Throws DistributedError when the server cannot be reached.
  static Store redis(const std::string& host, int port);
  // From the environment, like torchrun: MEMGRAD_STORE_PATH names a file store's folder;
  // otherwise MASTER_ADDR and MASTER_PORT name the redis-server. Throws DistributedError naming
  // the variables when neither is set or a value is invalid.
  static Store from_env();

  // Sets `key` (once: Gloo's stores refuse to overwrite a key).
  void set(const std::string& key, const std::string& value);
  // Waits until `key` is set (up to `timeout`), then returns its value. Throws DistributedError
  // naming the key on a timeout.
  std::string get(const std::string& key, std::chrono::milliseconds timeout);
  // Whether every key of `keys` is set within `timeout` (false on a timeout).
  bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  // "file store /tmp/memgrad-launch-x1y2" or "redis store 10.0.0.1:6379".
  const std::string& describe() const;
  // The redis-server's port (its connection is not a collective's), or 0 for a file store.
  int redis_port() const;

  struct Impl;  // the Gloo store (distributed/store_impl.h)
  const std::shared_ptr<Impl>& impl() const { return impl_; }

 private:
  explicit Store(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace memgrad::distributed
