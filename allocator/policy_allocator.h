// The base every allocator policy derives from: the lock, the PyTorch-named stats, the memory
// fraction, the OutOfMemoryError, the trace and the public allocate(), written once.
//
// A policy (caching, passthrough, pinned, and the lab's first_fit, buddy, size_class, arena,
// expandable) derives from PolicyAllocator and writes only its placement rules, the hooks of
// Allocator (allocator/allocator.h): where a request goes, what a free merges, what empty_cache
// releases, what its snapshot shows. The helpers below keep the stats consistent across policies
// (a segment is what the policy obtained from the source, a block what it handed out) so that the
// same tests, the same summary and the same replay table apply to all of them. Callers hold a
// PolicyAllocator: allocate, free, read the stats, set the fraction, record the trace.
//
// Thread safety: every public method may be called from any thread. The public methods below
// take mutex_; a policy's hooks take it themselves (one lock_guard at the top of each).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "allocator/allocator.h"
#include "allocator/fragmentation.h"
#include "allocator/memory_source.h"
#include "allocator/stats.h"
#include "allocator/trace.h"

namespace memgrad {

// A segment's contribution to the inactive_split stats: its free blocks and their bytes while it
// also holds an allocated block (a segment with nothing allocated can be released whole).
struct SplitTally {
  int64_t blocks = 0;
  int64_t bytes = 0;
};

class PolicyAllocator : public Allocator {
 public:
  // Hands out at least `nbytes` on `stream`. Allocates: the policy's rounded size (Block::nbytes).
  // A zero-byte request returns an empty Block without touching the source or the stats.
  // Throws OutOfMemoryError when `nbytes` exceeds kMaxAllocationBytes (counted nowhere, as in
  // PyTorch), and when the source cannot provide the memory even after the policy returned what
  // it caches (counted in num_ooms). Every request passes here, so no policy sees either of the
  // first two cases.
  Block allocate(size_t nbytes, StreamId stream = kDefaultStream);

  // A copy of the statistics. Allocates: nothing on the device.
  MemoryStats stats() const;
  // Peaks := current values.
  void reset_peak_stats();
  // Cumulative totals and event counters := 0.
  void reset_accumulated_stats();

  // Bytes in blocks handed out (allocated_bytes.all.current), and everything held from the
  // source (reserved_bytes.all.current). Cheaper than stats().
  size_t memory_allocated() const;
  size_t memory_reserved() const;

  // Limits what the policy may reserve to fraction x source capacity (0 < fraction <= 1); from
  // then on a fraction counts as set, even 1.0 (PyTorch's rule). Reserved bytes above a new,
  // lower limit stay reserved; only later requests see it. Throws ConfigError outside (0, 1].
  void set_memory_fraction(double fraction);

  // Where reserved - allocated is now, for requests on `stream` (allocator/fragmentation.h):
  // hard, soft and stream bytes (they sum to it exactly), rounding, the largest free block and
  // the largest request that would succeed now. Allocates: host memory only.
  FragmentationReport fragmentation(StreamId stream = kDefaultStream) const;

  // The source the policy obtains its segments from (not owned).
  MemorySource& source() const { return source_; }
  // Records a marker event with the totals of the moment, when the trace is on:
  // TraceAction::EmptyCache when the program calls empty_cache(), so a replay repeats the call
  // there; TraceAction::Snapshot when a memory snapshot is taken, with `nbytes` its active bytes
  // (PyTorch's snapshot entry). The marker's address is 0.
  void mark_in_trace(TraceAction action, uint64_t nbytes = 0);

  // The policy's trace recorder (off until enabled).
  TraceRecorder& trace() { return trace_; }
  const TraceRecorder& trace() const { return trace_; }

 protected:
  // The bytes the policy obtains from its source for a request of `nbytes` (its segment size):
  // what the largest request that would succeed now is computed with. The default, nbytes
  // rounded up to the source's alignment, is exact for policies that obtain one segment per
  // request of the request's size; others override it.
  virtual size_t source_bytes_for(size_t nbytes) const;

  // A policy over `source` (which must outlive it) limited to `memory_fraction` x its capacity;
  // 1.0 counts as no fraction set. Throws ConfigError when `memory_fraction` is outside (0, 1].
  PolicyAllocator(MemorySource& source, double memory_fraction);

  // The stats pool of a segment: small for segments of at most 2 MiB (kSmallBuffer).
  static StatPool pool_of_segment(size_t nbytes);
  // `nbytes` rounded up to a multiple of `multiple`.
  static size_t round_up(size_t nbytes, size_t multiple) {
    return (nbytes + multiple - 1) / multiple * multiple;
  }

  // ---- all below require mutex_ ----

  // Whether a fraction is set (by the constructor or set_memory_fraction()).
  bool fraction_set() const { return fraction_set_; }
  // The limit on reserved bytes: fraction x source capacity (the capacity when none is set).
  size_t allowed_bytes() const;
  // Whether `extra` more reserved bytes stay within allowed_bytes(); always true when no
  // fraction is set (the source then decides).
  bool within_fraction(size_t extra) const;
  // Whether `extra` more reserved bytes stay within allowed_bytes(), fraction set or not (a
  // policy that never asks the source for more than its capacity).
  bool within_allowed(size_t extra) const;

  // Obtains a segment of `nbytes` from the source: nullptr when within_fraction() or the source
  // says no (nothing counted), otherwise counts it (segment, reserved_bytes, num_device_alloc in
  // `pool`) and records SegmentAlloc. Allocates: nbytes from the source.
  void* obtain_segment(StatPool pool, size_t nbytes, StreamId stream = kDefaultStream);
  // Returns a segment obtained by obtain_segment() to the source, counts it (num_device_free)
  // and records SegmentFree.
  void return_segment(StatPool pool, void* ptr, size_t nbytes, StreamId stream = kDefaultStream);

  // Stat updates at the points PyTorch makes them. StatPool::All counts in the aggregate only
  // (a policy without pools). A free is two steps when the block waits on other streams:
  // count_free_requested when the caller frees it, count_free_completed when it can be reused;
  // count_free is both at once.
  void count_alloc(StatPool pool, size_t nbytes, size_t requested);  // allocation, active, ...
  void count_free(StatPool pool, size_t nbytes, size_t requested);
  void count_free_requested(StatPool pool, size_t nbytes);  // allocation, allocated_bytes
  void count_free_completed(StatPool pool, size_t nbytes, size_t requested);  // active, requested
  // Moves the inactive_split stats by `blocks` and `bytes` (either sign).
  void count_split_delta(StatPool pool, int64_t blocks, int64_t bytes);
  // Moves the inactive_split stats from a segment's old tally to its new one.
  void count_split_change(StatPool pool, SplitTally before, SplitTally after) {
    count_split_delta(pool, after.blocks - before.blocks, after.bytes - before.bytes);
  }

  // Counts the OOM, records it in the trace and throws OutOfMemoryError with the numbers of the
  // moment. `alloc_size`: what the policy last tried to obtain from the source.
  [[noreturn]] void throw_oom(size_t requested, size_t alloc_size, StreamId stream);

  // Records one trace event (when tracing is on) with the totals after it.
  void trace_event(TraceAction action, const void* ptr, size_t nbytes, size_t requested,
                   StreamId stream) {
    if (trace_.enabled()) [[unlikely]] record_trace(action, ptr, nbytes, requested, stream);
  }
  // A pointer as traces and snapshots show it: relative to the source's base.
  uint64_t trace_address(const void* ptr) const {
    return reinterpret_cast<uintptr_t>(ptr) - source_.address_base();
  }

  MemorySource& source_;
  TraceRecorder trace_;
  mutable std::mutex mutex_;
  MemoryStats stats_;

 private:
  void count_segment_alloc(StatPool pool, size_t nbytes);  // segment, reserved, num_device_alloc
  void count_segment_free(StatPool pool, size_t nbytes);   // and num_device_free
  void record_trace(TraceAction action, const void* ptr, size_t nbytes, size_t requested,
                    StreamId stream);

  bool fraction_set_ = false;
  double fraction_ = 1.0;
};

}  // namespace memgrad
