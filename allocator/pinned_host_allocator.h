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
#include <unordered_map>
#include <vector>

#include "allocator/config.h"
#include "allocator/policy_allocator.h"
#include "allocator/stream_events.h"

namespace memgrad {

class PinnedHostAllocator final : public PolicyAllocator {
 public:
  // Uses `config.memory_fraction`; the device policies' options are ignored. Throws ConfigError.
  explicit PinnedHostAllocator(MemorySource& source, const AllocatorConfig& config = {});

  std::string_view policy_name() const override { return "pinned"; }

  // Installs the event provider for record_stream. Not owned. Without one, record_stream is
  // ignored (frees are immediate).
  void set_stream_events(StreamEvents* events);

  // The size a request of `nbytes` is rounded to: the next power of two (0 for 0).
  static size_t round_size(size_t nbytes);
  // Blocks waiting on stream events right now.
  size_t pending_blocks() const;

 protected:
  // Allocates: nbytes rounded up to the next power of two, from the size class's free list or
  // the source. A new block that would take reserved bytes past fraction x capacity is not asked
  // of the source, fraction set or not.
  Placement place(const Request& request) override;
  // Caches the block in its size class's free list.
  SplitTally take_back(const Block& block) override;
  // Returns every cached block (not waiting on an event) to the source; whether there was one.
  bool release_cached() override;
  // One segment per block (blocks are never split), at absolute host addresses.
  void describe(std::vector<SegmentSnapshot>& out) const override;
  // Waits when a copy on a stream used the block (record_stream).
  bool defer_free(const Block& block) override;
  // Notes that work queued on `stream` uses the block (an asynchronous copy). Unlike the device
  // policy, the allocation stream is not exempt: host blocks have no stream of their own.
  void note_stream_use(const Block& block, StreamId stream) override;

 private:
  // A block obtained from the source, with the streams that used it.
  struct Record {
    void* ptr = nullptr;
    size_t size = 0;                   // power of two
    size_t requested = 0;              // until its free completes
    StreamId stream = kDefaultStream;  // the stream it was allocated on
    bool allocated = false;
    int event_count = 0;  // events still to complete before the block is free
    std::vector<StreamId> stream_uses;
  };
  static constexpr size_t kNumClasses = 64;  // one free list per power of two

  void process_events();

  std::unordered_map<void*, Record> records_;                 // every block held, by pointer
  std::array<std::vector<Record*>, kNumClasses> free_lists_;  // cached blocks per size class
  DeferredFrees<Record> deferred_;  // freed blocks a copy on another stream may still use
};

}  // namespace memgrad
