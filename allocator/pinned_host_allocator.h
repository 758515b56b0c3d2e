// The pinned host policy: PyTorch's CachingHostAllocator rules over any MemorySource.
//
// Page-locked host memory is what asynchronous host<->device copies read from and write to.
// Pinning is slow (cudaHostAlloc maps pages for the device), so freed blocks are cached; the
// rules are PyTorch's (aten/src/ATen/core/CachingHostAllocator.h):
//   - every request is rounded up to the next power of two and served from that size class's
//     free list (one list per power of two), else from a new source block of exactly that size;
//   - blocks are never split and never merged, so reserved = sum of the cached and used blocks;
//   - a block that an asynchronous copy used (record_stream) is reused only after an event
//     recorded on that copy's stream at free time has completed;
//   - empty_cache() returns every cached block to the source; allocated blocks stay.
// Statistics use the names of torch.cuda.host_memory_stats() where they exist (allocation,
// segment, allocated_bytes, reserved_bytes, num_host_alloc/free as num_device_alloc/free), in
// the "all" pool only: the host allocator has no small/large pools.
//
// The class is plain C++ (no CUDA): the CUDA build gives it a PinnedHostMemory source and the
// host stream events; tests give it host memory and fake events.
#pragma once

#include <array>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "allocator/allocator.h"
#include "allocator/caching_allocator.h"

namespace memgrad {

class PinnedHostAllocator final : public Allocator {
 public:
  explicit PinnedHostAllocator(MemorySource& source);
  ~PinnedHostAllocator() override;

 protected:
  // Allocates: nbytes rounded up to the next power of two, from the size class's free list or
  // the source. Throws OutOfMemoryError when the source has no room even after the cache was
  // returned to it.
  Block allocate_block(size_t nbytes, StreamId stream) override;

 public:
  // Caches the block: at once, or after the events of the streams recorded on it complete.
  void free(const Block& block) override;
  // Notes that work queued on `stream` uses the block (an asynchronous copy). Unlike the device
  // policy, the allocation stream is not exempt: host blocks have no stream of their own.
  void record_stream(const Block& block, StreamId stream) override;
  // Returns every cached block (not waiting on an event) to the source.
  void empty_cache() override;
  MemoryStats stats() const override;
  void reset_peak_stats() override;
  void reset_accumulated_stats() override;
  size_t memory_allocated() const override;
  size_t memory_reserved() const override;
  // One segment per block (blocks are never split).
  std::vector<SegmentSnapshot> snapshot() const override;
  void set_memory_fraction(double fraction) override;
  std::string_view policy_name() const override { return "pinned"; }
  // The trace recorder; without this the private trace() helper below would hide it.
  using Allocator::trace;

  // Installs the event provider for record_stream. Not owned. Without one, record_stream is
  // ignored (frees are immediate).
  void set_stream_events(StreamEvents* events);

  // The size a request of `nbytes` is rounded to: the next power of two (0 for 0).
  static size_t round_size(size_t nbytes);
  // Blocks waiting on stream events right now.
  size_t pending_blocks() const;

 private:
  // A block obtained from the source, with the streams that used it.
  struct Record {
    void* ptr = nullptr;
    size_t size = 0;       // power of two
    size_t requested = 0;  // while allocated
    bool allocated = false;
    int event_count = 0;   // events still to complete before the block is free
    std::vector<StreamId> stream_uses;
  };
  static constexpr size_t kNumClasses = 64;  // one free list per power of two

  // All private members below require mutex_.
  void* from_source(size_t size);  // nullptr when full or over the memory fraction
  void process_events();
  void make_free(Record* record);
  void release_cached();
  void trace(TraceAction action, const void* ptr, size_t nbytes, size_t requested,
             StreamId stream);
  [[noreturn]] void throw_oom(size_t requested, size_t size);

  mutable std::mutex mutex_;
  MemoryStats stats_;
  double fraction_ = 1.0;
  StreamEvents* events_ = nullptr;
  std::unordered_map<void*, Record> records_;               // every block held, by pointer
  std::array<std::vector<Record*>, kNumClasses> free_lists_;  // cached blocks per size class
  std::deque<std::pair<void*, Record*>> pending_events_;    // (event, block) in record order
};

}  // namespace memgrad
