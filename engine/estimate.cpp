// estimate_memory: a program on a fresh meta device, its peaks read back.
#include "engine/estimate.h"

#include "allocator/error.h"
#include "engine/memory.h"

namespace memgrad {

MemoryEstimate estimate_memory(const std::function<void(Device)>& program, size_t capacity,
                               const AllocatorConfig& config, int index) {
  const Device meta(DeviceType::Meta, index);
  set_allocator_config(meta, config);
  set_meta_capacity(index, capacity);  // a fresh allocator of that config over that capacity
  MemoryEstimate e;
  e.capacity = capacity;
  try {
    program(meta);
  } catch (const OutOfMemoryError& error) {
    if (error.info().device != meta.str()) throw;  // another device's: not the estimate's answer
    e.fits = false;
    e.out_of_memory = error.what();
  }
  e.peak_allocated = max_memory_allocated(meta);
  e.peak_reserved = max_memory_reserved(meta);
  e.allocated_after = memory_allocated(meta);
  e.reserved_after = memory_reserved(meta);
  set_meta_capacity(index, capacity);
  return e;
}

}  // namespace memgrad
