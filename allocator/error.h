// The allocator's errors: a bad configuration (ConfigError) and a device out of memory
// (OutOfMemoryError), both on memgrad::Error (base/error.h).
//
// An OutOfMemoryError says how much was asked for and where the memory went, as fields as well
// as in the text, so tests assert on numbers rather than parse strings.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "allocator/fragmentation.h"
#include "base/error.h"

namespace memgrad {

// A bad allocator configuration (MEMGRAD_ALLOC_CONF or the C++ API). `key` is the offending key
// and `value` its text; both may be empty when the problem is the syntax itself.
class ConfigError : public Error {
 public:
  ConfigError(std::string message, std::string key = {}, std::string value = {})
      : Error(std::move(message)), key(std::move(key)), value(std::move(value)) {}
  std::string key;
  std::string value;
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

}  // namespace memgrad
