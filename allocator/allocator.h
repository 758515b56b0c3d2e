// The allocator policy interface and the Block handle it returns.
//
// A policy decides how the bytes of one MemorySource are handed out: the caching policy keeps
// freed blocks for reuse, the passthrough policy sends every request to the source. Callers
// (the engine's Storage) see only this interface: allocate a Block, free it, read the stats.
// Every policy records into its own trace (off by default) and answers the same stats, so any
// program can run under any policy and be compared.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/memory_source.h"
#include "allocator/stats.h"
#include "allocator/trace.h"

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
};

// A segment obtained from the source and the blocks that tile it, sorted by address.
struct SegmentSnapshot {
  uint64_t address = 0;
  size_t nbytes = 0;
  StreamId stream = kDefaultStream;
  bool small_pool = false;
  std::vector<BlockSnapshot> blocks;
};

class Allocator {
 public:
  explicit Allocator(MemorySource& source);
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;
  virtual ~Allocator() = default;

  // Requests above this fail at once, before any policy rounds them (PyTorch's 1 EiB guard): no
  // device holds that much, and every policy's rounding stays far from overflow below it.
  static constexpr size_t kMaxAllocationBytes = size_t{1} << 60;

  // Hands out at least `nbytes` on `stream`. Allocates: the policy's rounded size (Block::nbytes).
  // A zero-byte request returns an empty Block without touching the source or the stats.
  // Throws OutOfMemoryError when `nbytes` exceeds kMaxAllocationBytes (counted nowhere, as in
  // PyTorch), and when the source cannot provide the memory even after the policy returned what
  // it caches (counted in num_ooms). Every request passes here, so no policy sees either case.
  Block allocate(size_t nbytes, StreamId stream = kDefaultStream);

  // Returns a Block obtained from allocate(). Freeing an empty Block does nothing.
  virtual void free(const Block& block) = 0;

  // Notes that `stream` also uses `block`, so a later free must wait for that stream's work
  // (PyTorch's record_stream). Policies without streams ignore it.
  virtual void record_stream(const Block& block, StreamId stream);

  // Returns every cached segment that holds no allocated block to the source. Allocated memory
  // is never touched.
  virtual void empty_cache() = 0;

  // A copy of the statistics.
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak_stats() = 0;
  virtual void reset_accumulated_stats() = 0;

  // Bytes in blocks handed out (allocated_bytes.all.current), and everything held from the
  // source (reserved_bytes.all.current). Cheaper than stats().
  virtual size_t memory_allocated() const = 0;
  virtual size_t memory_reserved() const = 0;

  // The segments and their blocks, sorted by address.
  virtual std::vector<SegmentSnapshot> snapshot() const = 0;

  // Limits what the policy may reserve to fraction x source capacity (0 < fraction <= 1).
  // Throws ConfigError outside that range.
  virtual void set_memory_fraction(double fraction) = 0;

  // The policy's name as MEMGRAD_ALLOC_CONF spells it: "caching", "passthrough", ...
  virtual std::string_view policy_name() const = 0;

  MemorySource& source() const { return source_; }
  TraceRecorder& trace() { return trace_; }
  const TraceRecorder& trace() const { return trace_; }

 protected:
  // The policy's placement of a request of 1 to kMaxAllocationBytes bytes.
  virtual Block allocate_block(size_t nbytes, StreamId stream) = 0;

  // Counts the OOM in `stats`, records it in the trace (when on) and throws OutOfMemoryError
  // with the figures of the moment. `alloc_size`: what the policy last tried to obtain from the
  // source; `allowed`: its limit (capacity x memory fraction), below capacity when
  // `fraction_set`.
  [[noreturn]] void throw_out_of_memory(MemoryStats& stats, size_t requested, size_t alloc_size,
                                        StreamId stream, size_t allowed, bool fraction_set);
  // A pointer as traces and snapshots show it: relative to the source's base.
  uint64_t trace_address(const void* ptr) const {
    return reinterpret_cast<uintptr_t>(ptr) - source_.address_base();
  }

  MemorySource& source_;
  TraceRecorder trace_;
};

}  // namespace memgrad
