// Store: Gloo's file and Redis stores behind memgrad's errors.
#include "distributed/store.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "distributed/error.h"
#include "distributed/rendezvous_env.h"
#include "distributed/store_impl.h"

#if MEMGRAD_WITH_GLOO
#include <gloo/common/error.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/redis_store.h>
#include <hiredis/hiredis.h>
#endif

namespace memgrad::distributed {
namespace {

#if MEMGRAD_WITH_GLOO
// Gloo's FileStore::wait compares the time elapsed, truncated to whole seconds, with the
// timeout: a wait of 1 ms lasts a second and one of 3 s about 4, so naming the ranks that did
// not join took a second per rank. This one keeps to the timeout within its 10 ms polling.
class FileStore final : public gloo::rendezvous::FileStore {
 public:
  using gloo::rendezvous::FileStore::FileStore;
  using gloo::rendezvous::FileStore::wait;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!check(keys)) {
      if (std::chrono::steady_clock::now() >= deadline) {
        throw gloo::IoException(
            fmt::format("wait of {} key(s) timed out after {} ms", keys.size(), timeout.count()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
};
#endif

[[noreturn, maybe_unused]] void no_gloo(const char* what) {
  throw DistributedError(fmt::format("[init_process_group] {} needs Gloo, and this build has none "
                                     "(install libgloo-dev and configure the build again)",
                                     what),
                         "init_process_group", -1);
}

#if MEMGRAD_WITH_GLOO
// Why the redis-server at host:port does not answer, or "" when it does. Gloo's RedisStore
// throws from its constructor without freeing its hiredis context, a leak on every attempt
// (and ranks try again while the server starts): connecting once with hiredis itself first,
// and freeing what it allocated, leaves Gloo only servers that answer.
std::string redis_unreachable(const std::string& host, int port) {
  const timeval timeout{2, 0};
  redisContext* c = redisConnectWithTimeout(host.c_str(), port, timeout);
  const std::string why = c == nullptr  ? "hiredis could not allocate a connection"
                          : c->err != 0 ? std::string(c->errstr)
                                        : std::string();
  redisFree(c);  // accepts nullptr
  return why;
}
#endif

}  // namespace

Store Store::file(const std::string& path) {
#if MEMGRAD_WITH_GLOO
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec || !std::filesystem::is_directory(path)) {
    throw DistributedError(fmt::format("[init_process_group] cannot use '{}' as a file store: {}",
                                       path, ec ? ec.message() : "not a folder"),
                           "init_process_group", -1);
  }
  auto impl = std::make_shared<Impl>();
  impl->store = std::make_shared<FileStore>(path);
  impl->description = fmt::format("file store {}", path);
  return Store(std::move(impl));
#else
  (void)path;
  no_gloo("a file store");
#endif
}

Store Store::redis(const std::string& host, int port) {
#if MEMGRAD_WITH_GLOO
  auto unreachable = [&](const std::string& why) {
    return DistributedError(fmt::format("[init_process_group] cannot reach the redis-server at "
                                        "{}:{} (MASTER_ADDR, MASTER_PORT): {}",
                                        host, port, why),
                            "init_process_group", -1);
  };
  if (const std::string why = redis_unreachable(host, port); !why.empty()) throw unreachable(why);
  auto impl = std::make_shared<Impl>();
  try {
    impl->store = std::make_shared<gloo::rendezvous::RedisStore>(host, port);
  } catch (const std::exception& e) {
    throw unreachable(e.what());
  }
  impl->description = fmt::format("redis store {}:{}", host, port);
  impl->redis_port = port;
  return Store(std::move(impl));
#else
  (void)host;
  (void)port;
  no_gloo("a Redis store");
#endif
}

Store Store::from_env() {
  if (const auto path = env_string("MEMGRAD_STORE_PATH")) return file(*path);
  const auto addr = env_string("MASTER_ADDR");
  const auto port = env_string("MASTER_PORT");
  if (addr && port) {
    return redis(*addr, static_cast<int>(env_int("MASTER_PORT", 1, 65535)));
  }
  throw DistributedError(
      "[init_process_group] no store: set MEMGRAD_STORE_PATH (a folder every rank can write, one "
      "host) or MASTER_ADDR and MASTER_PORT (a redis-server, several hosts); ./memgrad launch sets "
      "MEMGRAD_STORE_PATH",
      "init_process_group", -1);
}

void Store::set(const std::string& key, const std::string& value) {
#if MEMGRAD_WITH_GLOO
  try {
    impl_->store->set(key, std::vector<char>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    // A key set twice: the store still holds an earlier run's keys (a file store's folder
    // reused, a Redis server not flushed).
    const std::string what = e.what();
    const bool taken = what.find("already exists") != std::string::npos ||
                       what.find("already set") != std::string::npos;
    throw DistributedError(
        fmt::format("[store] cannot set '{}' in the {}: {}{}", key, impl_->description, what,
                    taken ? " (the store holds the keys of an earlier run: give this run a fresh "
                            "folder, MEMGRAD_STORE_PATH or ./memgrad launch's --store, or a new "
                            "MEMGRAD_RUN_ID)"
                          : ""),
        "store", -1);
  }
#else
  (void)key;
  (void)value;
  no_gloo("a store");
#endif
}

bool Store::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
#if MEMGRAD_WITH_GLOO
  try {
    impl_->store->wait(keys, timeout);
    return true;
  } catch (const gloo::IoException&) {
    return false;  // Gloo's stores signal a timeout this way
  } catch (const std::exception& e) {
    throw DistributedError(
        fmt::format("[store] cannot read the {}: {}", impl_->description, e.what()), "store", -1);
  }
#else
  (void)keys;
  (void)timeout;
  no_gloo("a store");
#endif
}

std::string Store::get(const std::string& key, std::chrono::milliseconds timeout) {
#if MEMGRAD_WITH_GLOO
  if (!wait({key}, timeout)) {
    throw DistributedError(fmt::format("[store] '{}' was not set in the {} within {} ms", key,
                                       impl_->description, timeout.count()),
                           "store", -1);
  }
  try {
    const std::vector<char> value = impl_->store->get(key);
    return std::string(value.begin(), value.end());
  } catch (const std::exception& e) {
    throw DistributedError(
        fmt::format("[store] cannot get '{}' from the {}: {}", key, impl_->description, e.what()),
        "store", -1);
  }
#else
  (void)key;
  (void)timeout;
  no_gloo("a store");
#endif
}

const std::string& Store::describe() const { return impl_->description; }

int Store::redis_port() const { return impl_->redis_port; }

}  // namespace memgrad::distributed
