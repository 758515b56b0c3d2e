// The frame every allocator policy runs in: PolicyAllocator owns allocate() and free(), and a
// policy writes only where blocks go.
//
// allocate() takes the lock and asks the policy to place the request (place). When the policy
// refuses (nothing it holds fits and its source said no), it asks it to release what it caches
// (release_cached) and to place the request once more; a second refusal is an OutOfMemoryError
// with the figures of the moment. A placed block is counted in the stats with PyTorch's names and
// recorded in the trace. free() counts and records the free and gives the block back to the
// policy (take_back), after the streams that used it are done when the policy waits for them
// (defer_free). empty_cache(), snapshot() and record_stream() call release_cached, describe and
// note_stream_use under the same lock. So every policy answers the same stats, traces and errors,
// and any program runs under any policy and can be compared: the caching, passthrough and pinned
// host policies here, the lab's in lab/policies/, and a policy of your own
// (docs/allocator-lab.md, "Write your own policy in one file").
//
// Thread safety: every public method may be called from any thread. The hooks run with the
// frame's lock held and must not call the public methods.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "allocator/allocator.h"
#include "allocator/error.h"
#include "allocator/fragmentation.h"
#include "allocator/memory_source.h"
#include "allocator/spin_mutex.h"
#include "allocator/stats.h"
#include "allocator/trace.h"

namespace memgrad {

// A change of the inactive_split stats: free blocks, and their bytes, in segments that also hold
// an allocated block (a segment with nothing allocated can be released whole).
struct SplitTally {
  int64_t blocks = 0;
  int64_t bytes = 0;
};
// The change from `before` to `after` (a segment's tally around a placement or a free).
inline SplitTally operator-(SplitTally after, SplitTally before) {
  return {after.blocks - before.blocks, after.bytes - before.bytes};
}

// One request, as the frame asks a policy to place it.
struct Request {
  size_t nbytes = 0;  // 1 to kMaxAllocationBytes: what the caller asked for
  StreamId stream = kDefaultStream;
  bool retry = false;  // the one retry after release_cached()
};

// A segment as a replay finds it at the start of a recorded history (PolicyAllocator::seed):
// its size, stream and pool, and the blocks that tile it in address order, allocated or free.
struct SeedBlock {
  size_t nbytes = 0;     // the block's bytes (a multiple of 512)
  size_t requested = 0;  // an allocated block's requested bytes
  bool allocated = false;
};
struct SeedSegment {
  size_t nbytes = 0;
  StreamId stream = kDefaultStream;
  bool small_pool = false;
  std::vector<SeedBlock> blocks;
};

// Where a policy put a request: the answer of PolicyAllocator::place.
struct Placement {
  void* ptr = nullptr;            // the block's first byte; nullptr: refused
  size_t nbytes = 0;              // the block's bytes after rounding; when refused: the bytes the
                                  // policy last tried to obtain from its source (the OOM's
                                  // alloc_size)
  StatPool pool = StatPool::All;  // the stats pool the block counts in
  void* record = nullptr;         // the policy's bookkeeping, handed back in the Block
  SplitTally split;               // how placing it changed the inactive_split stats
  // The policy hands this same block out again, changing nothing else, when its caller frees it
  // and the next request asks for the same bytes on the same stream with nothing in between (the
  // caching policy's reuse of the block it last freed). The frame then serves that pair from its
  // hot block without calling the policy.
  bool repeatable = false;

  Placement() = default;
  Placement(void* ptr, size_t nbytes, StatPool pool, void* record = nullptr, SplitTally split = {})
      : ptr(ptr), nbytes(nbytes), pool(pool), record(record), split(split) {}
  // Nothing the policy holds fits, and its source refused `tried` bytes.
  static Placement refused(size_t tried) { return {nullptr, tried, StatPool::All}; }
};

class PolicyAllocator {
 public:
  PolicyAllocator(const PolicyAllocator&) = delete;
  PolicyAllocator& operator=(const PolicyAllocator&) = delete;
  // Returns every segment the policy still holds to the source (blocks still allocated belong to
  // objects that outlive the allocator; their memory goes with it).
  virtual ~PolicyAllocator();

  // Hands out at least `nbytes` on `stream`. Allocates: the policy's rounded size (Block::nbytes).
  // A zero-byte request returns an empty Block without touching the source or the stats.
  // Throws OutOfMemoryError when `nbytes` exceeds kMaxAllocationBytes (counted nowhere, as in
  // PyTorch), and when the policy cannot place it even after releasing what it caches (counted
  // in num_ooms, with the fragmentation of the moment).
  Block allocate(size_t nbytes, StreamId stream = kDefaultStream);
  // Returns a Block obtained from allocate(). Freeing an empty Block does nothing; freeing a
  // Block twice is an InternalError.
  void free(const Block& block);
  // Notes that `stream` also uses `block`, so its free waits for that stream's work (PyTorch's
  // record_stream). Policies without streams ignore it.
  void record_stream(const Block& block, StreamId stream);
  // Returns cached memory that holds no allocated block to the source (what release_cached
  // releases). Allocated memory is never touched.
  void empty_cache();
  // Makes `segment` as it is described: a segment of exactly its bytes on its stream and pool,
  // its allocated blocks handed out (returned in address order, counted and traced as allocations
  // are) and its free blocks cached, as a replay's start state. nullopt when the policy cannot
  // make a segment to order (only the caching policy can) or the source refuses it (nothing
  // obtained or counted then). Blocks that do not tile the segment in multiples of 512 bytes are
  // an InternalError (the caller checks what it reads).
  std::optional<std::vector<Block>> seed(const SeedSegment& segment);
  // The segments and their blocks, sorted by address. Allocates: host memory only.
  std::vector<SegmentSnapshot> snapshot() const;
  // The policy's name as MEMGRAD_ALLOC_CONF spells it: "caching", "passthrough", ...
  virtual std::string_view policy_name() const = 0;

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

  // Says what the block at `ptr` is (TraceName), when the trace is on; nothing otherwise.
  void name_in_trace(const void* ptr, std::string_view module, std::string_view role) {
    if (trace_.enabled()) trace_.name(trace_address(ptr), module, role);
  }

  // The policy's trace recorder (off until enabled).
  TraceRecorder& trace() { return trace_; }
  const TraceRecorder& trace() const { return trace_; }

 protected:
  // A policy over `source` (which must outlive it) limited to `memory_fraction` x its capacity;
  // 1.0 counts as no fraction set. Throws ConfigError when `memory_fraction` is outside (0, 1].
  PolicyAllocator(MemorySource& source, double memory_fraction);

  // ---- the hooks a policy writes; the frame calls them with its lock held ----

  // Places `request`: a block of at least request.nbytes from what the policy holds, or from
  // segments it obtains with obtain_segment(), with the block's rounded size, pool and the change
  // of the inactive_split stats; or Placement::refused(bytes it last tried to obtain). A retry
  // (request.retry) follows release_cached() and is the last try before the OutOfMemoryError.
  // The frame counts the block and records it in the trace.
  virtual Placement place(const Request& request) = 0;
  // Takes back a block its caller freed (and, with defer_free, whose streams are done): merges it,
  // caches it or returns its segment; returns the change of the inactive_split stats. The frame
  // has counted the free and recorded it in the trace. A block it does not hold allocated is an
  // InternalError (internal_check).
  virtual SplitTally take_back(const Block& block) = 0;
  // Returns cached memory that holds no allocated block to the source with return_segment() (or
  // unmaps it); returns whether placing again may now succeed (the frame then counts a retry in
  // num_alloc_retries and places once more; false: the OutOfMemoryError follows at once).
  virtual bool release_cached() = 0;
  // Appends a SegmentSnapshot per segment the policy holds, its blocks tiling it in address
  // order (the frame sorts the segments by address).
  virtual void describe(std::vector<SegmentSnapshot>& out) const = 0;
  // Called as the caller frees `block`, before take_back: returns true to finish the free later
  // with finish_free(), once the streams that used the block are done. The default waits for
  // nothing. A policy that keeps a block's live state should check it here or in take_back.
  virtual bool defer_free(const Block& /*block*/) { return false; }
  // Recreates `segment` (seed()) with obtain_segment(): the placements of its allocated blocks in
  // address order and the inactive_split tally of its free ones; nullopt, having obtained
  // nothing, when the policy cannot (the default) or the source refuses the segment.
  struct Seeded {
    std::vector<Placement> allocated;
    SplitTally free_splits;  // the segment's free blocks, when it has more than one block
  };
  virtual std::optional<Seeded> place_seed(const SeedSegment& /*segment*/) { return std::nullopt; }
  // `stream` also uses `block` (record_stream). The default ignores it.
  virtual void note_stream_use(const Block& /*block*/, StreamId /*stream*/) {}
  // The bytes the policy obtains from its source for a request of `nbytes` (its segment size):
  // what the largest request that would succeed now is computed with. The default, nbytes
  // rounded up to the source's alignment, is exact for policies that obtain one segment per
  // request of the request's size; others override it.
  virtual size_t source_bytes_for(size_t nbytes) const;

  // ---- what the hooks use (with the lock held) ----

  // Obtains a segment of `nbytes` from the source: nullptr when the memory fraction or the source
  // says no (nothing counted), otherwise counts it (segment, reserved_bytes, num_device_alloc,
  // oversize_segments in `pool`) and records SegmentAlloc. The frame holds it until
  // return_segment() or the destructor. Allocates: nbytes from the source.
  void* obtain_segment(StatPool pool, size_t nbytes, StreamId stream = kDefaultStream);
  // Returns a segment obtained by obtain_segment() to the source, counts it (num_device_free) and
  // records SegmentFree.
  void return_segment(StatPool pool, void* ptr, size_t nbytes, StreamId stream = kDefaultStream);
  // Counts pages of `nbytes` at `ptr` mapped into (`mapped`) or unmapped from an expandable
  // segment of `pool` with `calls` source calls, which changed the number of segments (runs of
  // mapped pages) by `segments`: reserved_bytes and num_device_alloc (num_device_free). Records
  // SegmentMap (SegmentUnmap).
  void count_mapping(StatPool pool, void* ptr, size_t nbytes, size_t calls, int segments,
                     bool mapped);
  // The SegmentSnapshot of the segment at `ptr` of `nbytes` in `pool` (its address relative to
  // the source's base), for describe() to add its blocks to.
  SegmentSnapshot segment_at(const void* ptr, size_t nbytes, StatPool pool,
                             StreamId stream = kDefaultStream) const;
  // Finishes the free of a block defer_free() kept, once its streams are done: records
  // FreeCompleted, calls take_back and counts it.
  void finish_free(const Block& block);
  // Counts a wait on every pending stream event (num_sync_all_streams).
  void count_sync_all_streams();
  // Counts a retry a policy makes on its own, inside place(), after releasing memory
  // (num_alloc_retries; the frame counts its own retry).
  void count_retry();
  // Blocks and segments of `nbytes` >= max_split_size count as oversize (caching's option);
  // SIZE_MAX: none do (the default).
  void set_max_split_size(size_t nbytes);

  // Whether a fraction is set (by the constructor or set_memory_fraction()).
  bool fraction_set() const;
  // The limit on reserved bytes: fraction x source capacity (the capacity when none is set).
  size_t allowed_bytes() const;
  // Whether `extra` more reserved bytes stay within allowed_bytes(); always true when no
  // fraction is set (the source then decides).
  bool within_fraction(size_t extra) const;
  // Whether `extra` more reserved bytes stay within allowed_bytes(), fraction set or not (a
  // policy that never asks the source for more than its capacity).
  bool within_allowed(size_t extra) const;
  // The stats as counted so far (read only: the frame counts).
  const MemoryStats& counted() const { return books_->stats_; }
  // A pointer as traces and snapshots show it: relative to the source's base.
  uint64_t trace_address(const void* ptr) const {
    return reinterpret_cast<uintptr_t>(ptr) - source_.address_base();
  }
  // The frame's lock, for a policy's own public methods (the hooks already hold it), with the
  // policy's state and the stats brought up to date (settle_hot).
  std::unique_lock<SpinMutex> lock() const {
    std::unique_lock<SpinMutex> guard(mutex_);
    settle_hot();
    return guard;
  }

  // The stats pool of a segment: small for segments of at most 2 MiB (kSmallBuffer).
  static StatPool pool_of_segment(size_t nbytes);
  // `nbytes` rounded up to a multiple of `multiple`.
  static size_t round_up(size_t nbytes, size_t multiple) {
    return (nbytes + multiple - 1) / multiple * multiple;
  }

  // ---- a policy made of policies (the planned policy and its caching fallback) ----

  // Makes `inner` a part of this policy: from then on it counts in this policy's stats, records
  // in this policy's trace and reserves within this policy's memory fraction. This policy calls
  // its hooks, under its own lock, through the functions below; `inner`'s public methods are no
  // longer used.
  void adopt(PolicyAllocator& inner);
  // `inner` places `request` as allocate() would (releasing its cache and retrying once), without
  // the OutOfMemoryError: a refusal comes back as Placement::refused.
  static Placement place_in(PolicyAllocator& inner, const Request& request);
  static SplitTally take_back_in(PolicyAllocator& inner, const Block& block);
  static bool defer_free_in(PolicyAllocator& inner, const Block& block);
  static bool release_cached_in(PolicyAllocator& inner);
  static void describe_in(const PolicyAllocator& inner, std::vector<SegmentSnapshot>& out);
  static void note_stream_use_in(PolicyAllocator& inner, const Block& block, StreamId stream);

  MemorySource& source_;

 private:
  // place, then release_cached and one retry when refused. (It and complete_free are inline, in
  // policy_allocator.cpp, so allocate() and free() run without calls of their own: the library is
  // position-independent, and GCC calls rather than inlines an exported function there.)
  static Placement place_with_retry(PolicyAllocator& policy, Request request);
  // free()'s body under the lock: counts and records the free, then defers it or completes it.
  // `traced` false: records nothing (a free the hot block served while the trace was off).
  void free_locked(const Block& block, bool traced);
  // finish_free's body: records FreeCompleted, calls take_back and counts.
  void complete_free(const Block& block, bool traced = true);
  // The OutOfMemoryError of a request above kMaxAllocationBytes, and of one the policy refused
  // after its retry (counted, recorded, with the fragmentation of the moment).
  [[noreturn, gnu::noinline, gnu::cold]] void throw_too_large(size_t nbytes) const;
  [[noreturn, gnu::noinline, gnu::cold]] void throw_oom(std::unique_lock<SpinMutex>& guard,
                                                        size_t requested, size_t alloc_size,
                                                        StreamId stream);
  // Counts the OOM, records it and returns its figures.
  OutOfMemoryInfo count_oom(size_t requested, size_t alloc_size, StreamId stream);
  bool is_oversize(size_t nbytes) const { return nbytes >= books_->max_split_size_; }
  // One segment of `nbytes` obtained (`sign` 1) or returned (-1): segment, reserved_bytes,
  // num_device_alloc or num_device_free, oversize_segments.
  void count_segment(StatPool pool, size_t nbytes, int sign);
  // Records one event (when tracing is on) with the totals after it.
  void trace_event(TraceAction action, const void* ptr, size_t nbytes, size_t requested,
                   StreamId stream) {
    if (books_->trace_.enabled()) [[unlikely]]
      record_event(action, ptr, nbytes, requested, stream);
  }
  void record_event(TraceAction action, const void* ptr, size_t nbytes, size_t requested,
                    StreamId stream);

  // The hot block: a repeatable placement (Placement::repeatable) kept by the frame, so that its
  // free and the next request for the same bytes on the same stream (a loop that frees a tensor
  // and makes the same one again) take the lock and nothing else. Such a pair leaves every
  // current value and peak where it was and adds to the totals only; the pairs are counted, and
  // a block its caller freed is given back to the policy, when anything else takes the lock
  // (settle_hot). What the allocator holds and hands out is the same as without it; only when
  // the counting happens moves, and nothing can read the stats in between.
  enum class Hot : uint8_t {
    None,  // no repeatable placement kept
    Out,   // kept and handed out
    Freed  // kept, freed by its caller, not yet given back to the policy
  };
  struct HotBlock {
    Block block;        // as allocate() hands it out
    SplitTally split;   // the inactive_split change of handing it out
    int64_t pairs = 0;  // free + allocate pairs served and not yet counted
    Hot state = Hot::None;
  };
  // Counts the hot block's pairs, gives it back to the policy when its caller has freed it, and
  // lets it go (Hot::None). Const for the readers (stats(), snapshot()): how the state is held
  // changes, not what it is.
  void settle_hot() const;
  // Counts hot_.pairs free + allocate pairs of the hot block, as free() and allocate() would.
  void count_hot_pairs();

  mutable SpinMutex mutex_;
  mutable HotBlock hot_;
  PolicyAllocator* books_ = this;  // whose stats, trace and fraction count (adopt() changes it)
  MemoryStats stats_;
  TraceRecorder trace_;
  bool fraction_set_ = false;
  double fraction_ = 1.0;
  size_t max_split_size_ = SIZE_MAX;
  std::map<void*, size_t> held_;  // segments obtained and not returned: start -> bytes
};

}  // namespace memgrad
