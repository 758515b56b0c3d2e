// Storage: the bytes of one or more tensors, and their shared version counter.
//
// A Storage owns one Block from its device's allocator. Every tensor that aliases it (the tensor
// that created it, its views, its detach()) holds a shared_ptr to it, so the bytes return to the
// allocator the moment the last such tensor goes away. The version counter lives here because
// every alias must see it: an in-place op through any alias bumps it, and autograd compares it
// with the version a saved tensor recorded.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "allocator/policy_allocator.h"
#include "engine/device.h"

namespace memgrad {

class Storage {
 public:
  // Allocates: nbytes from `device`'s allocator (rounded as the allocator rounds), on the
  // calling thread's current stream for a CUDA device. Throws OutOfMemoryError.
  Storage(size_t nbytes, Device device);
  // Allocates: nbytes from `allocator` (the pinned host allocator, for instance), for `device`.
  Storage(size_t nbytes, Device device, PolicyAllocator& allocator);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return block_.ptr; }
  // Bytes requested (numel x element size of the tensor that created it).
  size_t nbytes() const { return nbytes_; }
  // Bytes the allocator set aside for it (what memory_allocated() counts).
  size_t allocated_nbytes() const { return block_.nbytes; }
  Device device() const { return device_; }
  PolicyAllocator& allocator() const { return *allocator_; }
  const Block& block() const { return block_; }

  // The module whose parameter, buffer or state this is (an interned path, "" when none): the
  // optimizer and autograd's gradient accumulation run under it, so the trace puts their
  // allocations under the parameter's module.
  const char* trace_module() const { return trace_module_; }
  void set_trace_module(const char* module) { trace_module_ = module; }

  // The version counter: bumped once by every in-place op through any alias.
  uint32_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  PolicyAllocator* allocator_;
  Block block_;
  Device device_;
  size_t nbytes_;
  const char* trace_module_ = "";
  std::atomic<uint32_t> version_{0};
};

}  // namespace memgrad
