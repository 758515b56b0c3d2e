// Allocator base: the parts every policy shares.
#include "allocator/allocator.h"

namespace memgrad {

Allocator::Allocator(MemorySource& source) : source_(source) {}

void Allocator::record_stream(const Block&, StreamId) {}

}  // namespace memgrad
