// An environment variable set for a scope, for tests of what memgrad reads from the
// environment (MEMGRAD_ALLOC_CONF, MEMGRAD_SIM_MEMORY, ...).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace memgrad::testing {

// Sets an environment variable for the current scope and restores the previous state after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) previous_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (previous_) {
      setenv(name_, previous_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> previous_;
};

}  // namespace memgrad::testing
