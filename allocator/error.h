// The root of memgrad's error hierarchy and the errors of the lowest layer.
//
// Every error memgrad throws derives from memgrad::Error (itself a std::runtime_error), so a
// program can catch one type at main. Errors a user acts on carry their numbers as fields as well
// as in the text: an OutOfMemoryError says how much was asked for and where the memory went, so
// tests assert on numbers rather than parse strings. Internal invariant failures are a separate
// type (InternalError) that names the file and line; user input never reaches them.
#pragma once

#include <cstddef>
#include <source_location>
#include <stdexcept>
#include <string>
#include <utility>

#include "allocator/fragmentation.h"

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

// A bad allocator configuration (MEMGRAD_ALLOC_CONF or the C++ API). `key` is the offending key
// and `value` its text; both may be empty when the problem is the syntax itself.
class ConfigError : public Error {
 public:
  ConfigError(std::string message, std::string key = {}, std::string value = {})
      : Error(std::move(message)), key(std::move(key)), value(std::move(value)) {}
  std::string key;
  std::string value;
};

// A file that could not be written or read. `path` names it; the message says why.
class IoError : public Error {
 public:
  IoError(std::string message, std::string path) : Error(std::move(message)), path(std::move(path)) {}
  std::string path;
};

// An allocator trace (or memory snapshot) that is not one or is malformed: the message names the
// event and the field, with its value.
class TraceError : public Error {
 public:
  using Error::Error;
};

// The numbers behind an out-of-memory failure, all in bytes.
struct OutOfMemoryInfo {
  std::string device;         // e.g. "cpu", "sim:0", "cuda:0"
  size_t requested = 0;       // what the caller asked for, before rounding
  size_t alloc_size = 0;      // what the allocator tried to obtain from the source (a segment)
  size_t capacity = 0;        // total memory of the device
  size_t free = 0;            // memory of the device not held by anyone
  size_t allowed = 0;         // the allocator's limit (capacity x memory fraction)
  bool fraction_set = false;  // whether `allowed` is below capacity because of a fraction
  size_t allocated = 0;       // bytes in blocks handed out to tensors
  size_t reserved = 0;        // bytes the allocator holds (allocated + cached)
  bool too_large = false;     // refused before the policy saw it: above kMaxAllocationBytes
  // Where reserved - allocated was when the request failed (hard, soft, stream, the largest
  // free block and the largest request that would have succeeded), filled by the allocator.
  bool has_fragmentation = false;
  FragmentationReport fragmentation;
};

// The device (real or simulated) could not provide memory even after the allocator returned its
// cached blocks. The message follows PyTorch's layout; the numbers are in `info`.
class OutOfMemoryError : public Error {
 public:
  explicit OutOfMemoryError(OutOfMemoryInfo info);
  const OutOfMemoryInfo& info() const { return info_; }
  size_t requested() const { return info_.requested; }
  size_t reserved_unallocated() const { return info_.reserved - info_.allocated; }

 private:
  OutOfMemoryInfo info_;
};

// Formats a byte count the way PyTorch's OOM message does: "512 bytes", "2.00 MiB", "1.50 GiB".
std::string format_size(size_t nbytes);

// Throws InternalError naming `where` (file and line). Prefer internal_check.
[[noreturn]] void throw_internal_error(const char* what, std::source_location where);

// Throws InternalError naming the caller's file and line when `condition` is false.
inline void internal_check(bool condition, const char* what,
                           std::source_location where = std::source_location::current()) {
  if (!condition) [[unlikely]] throw_internal_error(what, where);
}

}  // namespace memgrad
