// Storage: allocate on construction, free on destruction.
#include "engine/storage.h"

#include "allocator/trace.h"
#include "engine/device_backend.h"
#include "engine/memory.h"

namespace memgrad {

Storage::Storage(size_t nbytes, Device device) : Storage(nbytes, device, allocator_for(device)) {}

// A CUDA block belongs to the current stream: the caching allocator reuses it, once freed, only
// on that stream (other streams must record_stream it).
Storage::Storage(size_t nbytes, Device device, PolicyAllocator& allocator)
    : allocator_(&allocator),
      block_(allocator.allocate(nbytes, allocation_stream(device))),
      device_(device),
      nbytes_(nbytes) {}

Storage::~Storage() { allocator_->free(block_); }

}  // namespace memgrad
