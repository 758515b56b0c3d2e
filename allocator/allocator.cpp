// Allocator base: the parts every policy shares.
#include "allocator/allocator.h"

#include <utility>

#include "allocator/error.h"

namespace memgrad {
namespace {

// The figures of an OOM on `source` for a request of `requested` bytes, of which the policy
// tried to obtain `alloc_size` from the source.
OutOfMemoryInfo oom_info(const MemorySource& source, size_t requested, size_t alloc_size,
                         size_t allocated, size_t reserved) {
  OutOfMemoryInfo info;
  info.device = source.name();
  info.requested = requested;
  info.alloc_size = alloc_size;
  info.capacity = source.capacity();
  info.free = source.free_bytes();
  info.allowed = info.capacity;
  info.allocated = allocated;
  info.reserved = reserved;
  return info;
}

}  // namespace

Allocator::Allocator(MemorySource& source) : source_(source) {}

Block Allocator::allocate(size_t nbytes, StreamId stream) {
  if (nbytes == 0) return Block{nullptr, 0, 0, stream, nullptr};
  if (nbytes > kMaxAllocationBytes) [[unlikely]] {
    OutOfMemoryInfo info = oom_info(source_, nbytes, nbytes, memory_allocated(), memory_reserved());
    info.too_large = true;
    throw OutOfMemoryError(std::move(info));
  }
  return allocate_block(nbytes, stream);
}

void Allocator::record_stream(const Block&, StreamId) {}

void Allocator::throw_out_of_memory(MemoryStats& stats, size_t requested, size_t alloc_size,
                                    StreamId stream, size_t allowed, bool fraction_set) {
  ++stats.num_ooms;
  OutOfMemoryInfo info = oom_info(source_, requested, alloc_size,
                                  static_cast<size_t>(stats.allocated_bytes.all().current),
                                  static_cast<size_t>(stats.reserved_bytes.all().current));
  info.fraction_set = fraction_set;
  info.allowed = allowed;
  if (trace_.enabled()) {
    trace_.record(TraceAction::Oom, info.free, alloc_size, requested, stream,
                  stats.allocated_bytes.all().current, stats.reserved_bytes.all().current);
  }
  throw OutOfMemoryError(std::move(info));
}

}  // namespace memgrad
