// Test helpers for the engine's typed errors: read the fields of the error an expression throws
// (caught(), tests/support/caught.h) and compare them with a readable failure. Tests assert the
// fields (the op, the shapes in their roles, the index) rather than parse the message;
// CHECK_THROWS_WITH_AS stays for tests whose point is the message itself.
#pragma once

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/shape.h"
#include "tests/support/caught.h"

namespace memgrad::testing {

// Checks that a ShapeError's shape in `role` ("lhs", "rhs", "expected", "actual") is set and
// equals `expected`, naming the role and both shapes on failure.
inline void check_shape(const std::optional<Shape>& got, const Shape& expected, const char* role) {
  CHECK_MESSAGE(got == expected,
                fmt::format("{} is {}, expected {}", role, got ? to_string(*got) : "not set",
                            to_string(expected)));
}

// Checks that `fn` throws a DeviceError from `op` naming `devices`, in that order.
template <typename F>
void check_device_error(F&& fn, const std::string& op, const std::vector<std::string>& devices) {
  const std::optional<DeviceError> e = caught<DeviceError>(std::forward<F>(fn));
  if (!e) return;
  CHECK_EQ(e->op(), op);
  CHECK_MESSAGE(e->devices() == devices,
                fmt::format("devices {} != expected {}", fmt::join(e->devices(), ", "),
                            fmt::join(devices, ", ")));
}

// Checks that `fn` throws a ValueError from `op` about `argument` with `value`.
template <typename F>
void check_value_error(F&& fn, const std::string& op, const std::string& argument,
                       const std::string& value = {}) {
  const std::optional<ValueError> e = caught<ValueError>(std::forward<F>(fn));
  if (!e) return;
  CHECK_EQ(e->op(), op);
  CHECK_EQ(e->argument(), argument);
  CHECK_EQ(e->value(), value);
}

// Checks that `fn` throws a CheckpointError from `op` about `path` and `entry`.
template <typename F>
void check_checkpoint_error(F&& fn, const std::string& op, const std::string& path,
                            const std::string& entry = {}) {
  const std::optional<CheckpointError> e = caught<CheckpointError>(std::forward<F>(fn));
  if (!e) return;
  CHECK_EQ(e->op(), op);
  CHECK_EQ(e->path(), path);
  CHECK_EQ(e->entry(), entry);
}

// Checks that an error's dtypes() are `expected`, naming both lists on failure.
inline void check_dtypes(const std::vector<DType>& got, const std::vector<DType>& expected) {
  std::vector<std::string_view> got_text, expected_text;
  for (DType d : got) got_text.push_back(dtype_name(d));
  for (DType d : expected) expected_text.push_back(dtype_name(d));
  CHECK_MESSAGE(got == expected, fmt::format("dtypes {} != expected {}", fmt::join(got_text, ", "),
                                             fmt::join(expected_text, ", ")));
}

}  // namespace memgrad::testing
