// What an allocator hands out and shows: the Block a caller gets and gives back, the snapshot of
// segments and blocks, and the largest request any policy accepts.
//
// Every policy derives from PolicyAllocator (allocator/policy_allocator.h), which owns the
// public allocate() and free() and asks the policy only where a block goes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "allocator/stats.h"
#include "allocator/stream.h"

namespace memgrad {

// Requests above this fail at once, before any policy rounds them (PyTorch's 1 EiB guard): no
// device holds that much, and every policy's rounding stays far from overflow below it.
inline constexpr size_t kMaxAllocationBytes = size_t{1} << 60;

// One allocation handed to a caller. Pass the same Block back to PolicyAllocator::free().
struct Block {
  void* ptr = nullptr;   // start of the usable bytes (nullptr for a zero-byte request)
  size_t nbytes = 0;     // bytes reserved for the caller after rounding (allocated_bytes)
  size_t requested = 0;  // bytes the caller asked for (requested_bytes)
  StreamId stream = kDefaultStream;  // stream the block was allocated on
  StatPool pool = StatPool::All;     // the stats pool it counts in
  void* record = nullptr;            // the policy's own bookkeeping; opaque to callers
};

// A block inside a segment, as snapshot() describes it.
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

}  // namespace memgrad
