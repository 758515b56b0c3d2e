// Message building for the allocator's errors. The OOM text keeps PyTorch's sentence structure
// (users search for it) but names the request and the segment separately, because PyTorch's
// "Tried to allocate" prints only the segment size, which confuses readers of small requests.
#include "allocator/error.h"

#include <fmt/format.h>

namespace memgrad {
namespace {

std::string oom_message(const OutOfMemoryInfo& info) {
  if (info.too_large) {
    return fmt::format(
        "{} out of memory. Tried to allocate more than 1 EiB ({} bytes requested): no device "
        "holds that much, so the size was probably computed wrongly (an overflow, or a negative "
        "number read as unsigned).",
        info.device, info.requested);
  }
  std::string alloc_part = format_size(info.alloc_size);
  if (info.alloc_size != info.requested) {
    alloc_part += fmt::format(" (a segment for a request of {})", format_size(info.requested));
  }
  std::string allowed_part;
  if (info.fraction_set) allowed_part = fmt::format("{} allowed; ", format_size(info.allowed));
  std::string fragmentation_part;
  if (info.has_fragmentation && info.reserved > info.allocated) {
    std::string sentence = fragmentation_sentence(info.fragmentation);
    sentence[0] = 'O';  // a sentence of its own
    fragmentation_part = sentence + ". ";
  }
  return fmt::format(
      "{} out of memory. Tried to allocate {}. Device {} has a total capacity of {} of which {} "
      "is free. {}Of the allocated memory {} is allocated by memgrad, and {} is reserved by "
      "memgrad but unallocated. {}If reserved but unallocated memory is large try setting "
      "MEMGRAD_ALLOC_CONF=max_split_size_mb:N (or policy:expandable) to avoid fragmentation, or "
      "call empty_cache() to return cached blocks to the device.",
      info.device, alloc_part, info.device, format_size(info.capacity), format_size(info.free),
      allowed_part, format_size(info.allocated), format_size(info.reserved - info.allocated),
      fragmentation_part);
}

}  // namespace

OutOfMemoryError::OutOfMemoryError(OutOfMemoryInfo info)
    : Error(oom_message(info)), info_(std::move(info)) {}

std::string format_size(size_t nbytes) {
  constexpr double kKiB = 1024.0;
  if (nbytes <= 1024) return fmt::format("{} bytes", nbytes);
  if (nbytes <= 1024 * 1024) return fmt::format("{:.2f} KiB", nbytes / kKiB);
  if (nbytes <= 1024ull * 1024 * 1024) return fmt::format("{:.2f} MiB", nbytes / kKiB / kKiB);
  return fmt::format("{:.2f} GiB", nbytes / kKiB / kKiB / kKiB);
}

}  // namespace memgrad
