// The part every lab policy shares: the lock, the PyTorch-named stats, the memory fraction, the
// OutOfMemoryError and the trace.
//
// A lab policy (first_fit, buddy, size_class, arena, expandable) derives from PolicyAllocator and
// writes only its placement rules: where a request goes, what a free merges, what empty_cache
// releases. The helpers below keep the stats consistent across policies (a segment is what the
// policy obtained from the source, a block what it handed out) so that the same tests and the
// same replay table apply to all of them. None of the lab policies partitions its cache by
// stream: a block freed on one stream may be reused on another, which is correct where one
// stream runs the kernels (cpu, sim); on CUDA with several streams use the caching policy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "allocator/allocator.h"

namespace memgrad {

// A segment's contribution to the inactive_split stats: its free blocks and their bytes while it
// also holds an allocated block (a segment with nothing allocated can be released whole).
struct SplitTally {
  int64_t blocks = 0;
  int64_t bytes = 0;
};

class PolicyAllocator : public Allocator {
 public:
  MemoryStats stats() const override;
  void reset_peak_stats() override;
  void reset_accumulated_stats() override;
  size_t memory_allocated() const override;
  size_t memory_reserved() const override;
  // Throws ConfigError outside (0, 1].
  void set_memory_fraction(double fraction) override;

 protected:
  // Throws ConfigError when `memory_fraction` is outside (0, 1].
  PolicyAllocator(MemorySource& source, double memory_fraction);

  // The stats pool of a segment: small for segments of at most 2 MiB (kSmallBuffer).
  static StatPool pool_of_segment(size_t nbytes);
  // `nbytes` rounded up to a multiple of `multiple`.
  static size_t round_up(size_t nbytes, size_t multiple) {
    return (nbytes + multiple - 1) / multiple * multiple;
  }

  // ---- all below require mutex_ ----

  // Whether `extra` more reserved bytes stay within capacity x memory fraction.
  bool within_fraction(size_t extra) const;
  // The source's bytes, or nullptr when the fraction or the source says no. Counts nothing.
  void* source_allocate(size_t nbytes);

  // Stat updates at the points PyTorch makes them.
  void count_segment_alloc(StatPool pool, size_t nbytes);  // segment, reserved, num_device_alloc
  void count_segment_free(StatPool pool, size_t nbytes);   // and num_device_free
  void count_alloc(StatPool pool, size_t nbytes, size_t requested);  // allocation, active, ...
  void count_free(StatPool pool, size_t nbytes, size_t requested);
  // Moves the inactive_split stats from a segment's old tally to its new one.
  void count_split_change(StatPool pool, SplitTally before, SplitTally after);

  // Counts the OOM, records it in the trace and throws OutOfMemoryError with the numbers of the
  // moment. `alloc_size`: what the policy last tried to obtain from the source.
  [[noreturn]] void throw_oom(size_t requested, size_t alloc_size, StreamId stream);

  // Records one trace event (when tracing is on) with the totals after it.
  void trace_event(TraceAction action, const void* ptr, size_t nbytes, size_t requested,
             StreamId stream) {
    if (trace_.enabled()) [[unlikely]] record_trace(action, ptr, nbytes, requested, stream);
  }

  mutable std::mutex mutex_;
  MemoryStats stats_;

 private:
  void record_trace(TraceAction action, const void* ptr, size_t nbytes, size_t requested,
                    StreamId stream);
  size_t allowed_bytes() const;

  bool fraction_set_ = false;
  double fraction_ = 1.0;
};

}  // namespace memgrad
