// Test helpers for typed errors: catch the error an expression throws and read its fields, and
// compare shape and dtype fields with a readable failure. Tests assert the fields (the op, the
// shapes, the index) rather than parse the message; CHECK_THROWS_WITH_AS stays for tests whose
// point is the message itself.
#pragma once

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/dtype.h"
#include "engine/shape.h"

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

// Checks that an error's shapes() are `expected`, naming both lists on failure.
inline void check_shapes(const std::vector<Shape>& got, const std::vector<Shape>& expected) {
  std::vector<std::string> got_text, expected_text;
  for (const Shape& s : got) got_text.push_back(to_string(s));
  for (const Shape& s : expected) expected_text.push_back(to_string(s));
  CHECK_MESSAGE(got == expected,
                fmt::format("shapes {} != expected {}", fmt::join(got_text, ", "),
                            fmt::join(expected_text, ", ")));
}

// Checks that an error's dtypes() are `expected`, naming both lists on failure.
inline void check_dtypes(const std::vector<DType>& got, const std::vector<DType>& expected) {
  std::vector<std::string_view> got_text, expected_text;
  for (DType d : got) got_text.push_back(dtype_name(d));
  for (DType d : expected) expected_text.push_back(dtype_name(d));
  CHECK_MESSAGE(got == expected,
                fmt::format("dtypes {} != expected {}", fmt::join(got_text, ", "),
                            fmt::join(expected_text, ", ")));
}

}  // namespace memgrad::testing
