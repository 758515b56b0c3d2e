// Storage: allocate on construction, free on destruction.
#include "engine/storage.h"

#include "allocator/trace.h"
#include "engine/memory.h"

namespace memgrad {

Storage::Storage(size_t nbytes, Device device)
    : Storage(nbytes, device, allocator_for(device)) {}

Storage::Storage(size_t nbytes, Device device, Allocator& allocator)
    : allocator_(&allocator), block_(allocator.allocate(nbytes)), device_(device), nbytes_(nbytes) {}

Storage::~Storage() { allocator_->free(block_); }

}  // namespace memgrad
