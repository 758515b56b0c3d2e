// MemorySource defaults: a source without expansion says so when asked to reserve or map.
#include "allocator/memory_source.h"

#include <fmt/format.h>

#include "allocator/error.h"

namespace memgrad {
namespace {

[[noreturn]] void no_expansion(const MemorySource& source, const char* what) {
  throw Error(
      fmt::format("{}: the memory source does not support expansion ({} is not "
                  "available; supports_expansion() is false)",
                  source.name(), what));
}

}  // namespace

size_t MemorySource::expansion_page_nbytes() const { no_expansion(*this, "expansion_page_nbytes"); }

VirtualRegion MemorySource::reserve(size_t) { no_expansion(*this, "reserve"); }

bool MemorySource::map(const VirtualRegion&, size_t, size_t) { no_expansion(*this, "map"); }

void MemorySource::unmap(const VirtualRegion&, size_t, size_t) { no_expansion(*this, "unmap"); }

void MemorySource::release(const VirtualRegion&) { no_expansion(*this, "release"); }

}  // namespace memgrad
