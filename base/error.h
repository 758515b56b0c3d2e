// The root of memgrad's error hierarchy: memgrad::Error, the internal-invariant check, and the
// errors every room may raise (IoError).
//
// Every error memgrad throws derives from memgrad::Error (itself a std::runtime_error), so a
// program can catch one type at main. Errors a user acts on carry their values as fields as well
// as in the text, so tests assert on fields rather than parse strings. Each room adds its own
// typed errors on top of these (allocator/error.h: ConfigError and OutOfMemoryError;
// interop/error.h, engine/error.h, autograd/error.h, ...). Internal invariant failures are a
// separate type (InternalError) that names the file and line; user input never reaches them.
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>
#include <utility>

namespace memgrad {

// Base of every memgrad error.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A broken internal invariant: a bug in memgrad, never the user's input.
class InternalError : public Error {
 public:
  using Error::Error;
};

// A file that could not be written or read. `path` names it and `error_number` is the
// system's errno for the failure (0 when no system call failed: a missing folder found by a
// check); the message says why in words.
class IoError : public Error {
 public:
  IoError(std::string message, std::string path, int error_number = 0)
      : Error(std::move(message)), path(std::move(path)), error_number(error_number) {}
  std::string path;
  int error_number;
};

// Throws InternalError naming `where` (file and line). Prefer internal_check.
[[noreturn]] void throw_internal_error(const char* what, std::source_location where);

// Throws InternalError naming the caller's file and line when `condition` is false.
inline void internal_check(bool condition, const char* what,
                           std::source_location where = std::source_location::current()) {
  if (!condition) [[unlikely]]
    throw_internal_error(what, where);
}

}  // namespace memgrad
