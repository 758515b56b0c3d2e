// The allocator policy interface and the Block handle it returns.
//
// A policy decides how the bytes of one MemorySource are handed out: the caching policy keeps
// freed blocks for reuse, the passthrough policy sends every request to the source. This header
// is the whole of what a policy must write (allocate_block, free, empty_cache, snapshot,
// policy_name; record_stream when it knows streams). The stats, the memory fraction, the trace
// and the OOM error are written once, in PolicyAllocator, so every policy answers the same
// stats and any program can run under any policy and be compared.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "allocator/stream.h"

namespace memgrad {

// One allocation handed to a caller. Pass the same Block back to Allocator::free().
struct Block {
  void* ptr = nullptr;      // start of the usable bytes (nullptr for a zero-byte request)
  size_t nbytes = 0;        // bytes reserved for the caller after rounding (allocated_bytes)
  size_t requested = 0;     // bytes the caller asked for (requested_bytes)
  StreamId stream = kDefaultStream;  // stream the block was allocated on
  void* record = nullptr;   // the policy's own bookkeeping; opaque to callers
};

// A block inside a segment, as memory_snapshot() describes it.
struct BlockSnapshot {
  uint64_t address = 0;  // device address (relative to the source's base for simulated devices)
  size_t nbytes = 0;
  size_t requested = 0;
  bool allocated = false;
  bool pending_free = false;  // freed by its owner, waiting on stream events before reuse
};

// A segment obtained from the source and the blocks that tile it, sorted by address.
struct SegmentSnapshot {
  uint64_t address = 0;
  size_t nbytes = 0;
  StreamId stream = kDefaultStream;
  bool small_pool = false;
  bool expandable = false;  // pages mapped into a reserved range (grows and shrinks in place)
  std::vector<BlockSnapshot> blocks;
};

// What a policy writes: the placement rules, and nothing else. Everything policies share (the
// lock, the stats with PyTorch's names, the memory fraction, the OutOfMemoryError, the trace and
// the public allocate()) lives once in PolicyAllocator (allocator/policy_allocator.h), from which
// every policy derives; callers hold a PolicyAllocator. docs/allocator-lab.md, "Write your own
// policy in one file", says what each hook must keep true.
class Allocator {
 public:
  Allocator() = default;
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;
  virtual ~Allocator() = default;

  // Requests above this fail at once, before any policy rounds them (PyTorch's 1 EiB guard): no
  // device holds that much, and every policy's rounding stays far from overflow below it.
  static constexpr size_t kMaxAllocationBytes = size_t{1} << 60;

  // Returns a Block obtained from allocate(). Freeing an empty Block does nothing.
  virtual void free(const Block& block) = 0;

  // Notes that `stream` also uses `block`, so a later free must wait for that stream's work
  // (PyTorch's record_stream). Policies without streams keep this default, which ignores it.
  virtual void record_stream(const Block& /*block*/, StreamId /*stream*/) {}

  // Returns every cached segment that holds no allocated block to the source. Allocated memory
  // is never touched.
  virtual void empty_cache() = 0;

  // The segments and their blocks, sorted by address.
  virtual std::vector<SegmentSnapshot> snapshot() const = 0;

  // The policy's name as MEMGRAD_ALLOC_CONF spells it: "caching", "passthrough", ...
  virtual std::string_view policy_name() const = 0;

 protected:
  // The policy's placement of a request of 1 to kMaxAllocationBytes bytes on `stream`: at least
  // `nbytes` usable bytes, Block::nbytes the rounded size, Block::requested = `nbytes`.
  // PolicyAllocator::allocate() calls it for every request it did not answer itself.
  virtual Block allocate_block(size_t nbytes, StreamId stream) = 0;
};

}  // namespace memgrad
