// The rendezvous environment variables, checked.
#include "distributed/rendezvous_env.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "distributed/error.h"

namespace memgrad::distributed {

std::optional<std::string> env_string(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

int64_t env_int(const char* name, int64_t min, int64_t max) {
  const auto text = env_string(name);
  if (!text) {
    throw DistributedError(fmt::format("[init_process_group] {} is not set (./memgrad launch sets "
                                       "RANK, WORLD_SIZE and LOCAL_RANK for each rank)",
                                       name),
                           "init_process_group", -1);
  }
  int64_t value = 0;
  const char* end = text->data() + text->size();
  const auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc() || ptr != end || value < min || value > max) {
    throw DistributedError(fmt::format("[init_process_group] {}={} is not an integer in [{}, {}]",
                                       name, *text, min, max),
                           "init_process_group", -1);
  }
  return value;
}

RendezvousEnv rendezvous_env() {
  RendezvousEnv env;
  env.world_size = static_cast<int>(env_int("WORLD_SIZE", 1, 1 << 16));
  env.rank = static_cast<int>(env_int("RANK", 0, env.world_size - 1));
  env.local_rank = env_string("LOCAL_RANK")
                       ? static_cast<int>(env_int("LOCAL_RANK", 0, env.world_size - 1))
                       : env.rank;
  return env;
}

std::chrono::milliseconds timeout_from_env() {
  const auto text = env_string("MEMGRAD_DIST_TIMEOUT");
  if (!text) return kDefaultTimeout;
  char* end = nullptr;
  const double seconds = std::strtod(text->c_str(), &end);
  if (end == text->c_str() || *end != '\0' || !std::isfinite(seconds) || seconds <= 0 ||
      seconds > 86400) {
    throw DistributedError(fmt::format("[init_process_group] MEMGRAD_DIST_TIMEOUT={} is not a "
                                       "number of seconds in (0, 86400]",
                                       *text),
                           "init_process_group", -1);
  }
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

}  // namespace memgrad::distributed
