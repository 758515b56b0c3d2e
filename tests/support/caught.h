// Catching the typed error an expression throws, to read its fields: for every suite, the
// allocator's included (the engine's helpers are in tests/support/error_check.h).
#pragma once

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <utility>

#include "allocator/error.h"

namespace memgrad::testing {

// The error of type E that `fn` throws. Empty, with a failed check, when `fn` returns normally;
// an exception of another type propagates and fails the test case.
template <typename E, typename F>
std::optional<E> caught(F&& fn) {
  try {
    std::forward<F>(fn)();
  } catch (const E& e) {
    return e;
  }
  FAIL_CHECK("the expression threw nothing");
  return std::nullopt;
}

// Checks that `fn` throws a ConfigError about `key` with `value`.
template <typename F>
void check_config_error(F&& fn, const std::string& key, const std::string& value) {
  const std::optional<ConfigError> e = caught<ConfigError>(std::forward<F>(fn));
  if (!e) return;
  CHECK_EQ(e->key, key);
  CHECK_EQ(e->value, value);
}

}  // namespace memgrad::testing
