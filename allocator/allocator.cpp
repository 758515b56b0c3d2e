// Allocator base: the parts every policy shares.
#include "allocator/allocator.h"

#include <utility>

#include "allocator/error.h"

namespace memgrad {

Allocator::Allocator(MemorySource& source) : source_(source) {}

Block Allocator::allocate(size_t nbytes, StreamId stream) {
  if (nbytes == 0) return Block{nullptr, 0, 0, stream, nullptr};
  if (nbytes > kMaxAllocationBytes) [[unlikely]] {
    OutOfMemoryInfo info;
    info.device = source_.name();
    info.requested = nbytes;
    info.alloc_size = nbytes;
    info.capacity = source_.capacity();
    info.free = source_.free_bytes();
    info.allowed = info.capacity;
    info.allocated = memory_allocated();
    info.reserved = memory_reserved();
    info.too_large = true;
    throw OutOfMemoryError(std::move(info));
  }
  return allocate_block(nbytes, stream);
}

void Allocator::record_stream(const Block&, StreamId) {}

void Allocator::throw_out_of_memory(MemoryStats& stats, size_t requested, size_t alloc_size,
                                    StreamId stream, size_t allowed, bool fraction_set) {
  ++stats.num_ooms;
  OutOfMemoryInfo info;
  info.device = source_.name();
  info.requested = requested;
  info.alloc_size = alloc_size;
  info.capacity = source_.capacity();
  info.free = source_.free_bytes();
  info.fraction_set = fraction_set;
  info.allowed = allowed;
  info.allocated = static_cast<size_t>(stats.allocated_bytes.all().current);
  info.reserved = static_cast<size_t>(stats.reserved_bytes.all().current);
  if (trace_.enabled()) {
    trace_.record(TraceAction::Oom, info.free, alloc_size, requested, stream,
                  stats.allocated_bytes.all().current, stats.reserved_bytes.all().current);
  }
  throw OutOfMemoryError(std::move(info));
}

}  // namespace memgrad
