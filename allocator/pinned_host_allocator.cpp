// PinnedHostAllocator: power-of-two size classes, never split, event-deferred reuse.
//
// Follows CachingHostAllocatorImpl (PyTorch): allocate = process finished events -> round to a
// power of two -> pop the size class's free list -> else a source call; free = record one event
// per stream that used the block and park it, or push it straight to its free list.
#include "allocator/pinned_host_allocator.h"

#include <algorithm>
#include <bit>

#include "allocator/error.h"

namespace memgrad {
namespace {

// The host allocator keeps only aggregate figures: PyTorch's host stats have no pools.
constexpr StatPool kPool = StatPool::All;

size_t size_class(size_t rounded) { return static_cast<size_t>(std::countr_zero(rounded)); }

}  // namespace

PinnedHostAllocator::PinnedHostAllocator(MemorySource& source, const AllocatorConfig& config)
    : PolicyAllocator(source, config.memory_fraction) {}

PinnedHostAllocator::~PinnedHostAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [ptr, record] : records_) source_.free(ptr, record.size);
}

size_t PinnedHostAllocator::round_size(size_t nbytes) {
  return nbytes == 0 ? 0 : std::bit_ceil(nbytes);
}

Block PinnedHostAllocator::allocate_block(size_t nbytes, StreamId stream) {
  constexpr size_t kLargest = size_t{1} << 62;  // bit_ceil above this is undefined
  std::lock_guard<std::mutex> lock(mutex_);
  if (nbytes > kLargest) throw_oom(nbytes, nbytes, kDefaultStream);
  deferred_.process([this](Record* done) { make_free(done); });
  const size_t size = round_size(nbytes);
  std::vector<Record*>& list = free_lists_[size_class(size)];
  Record* record = nullptr;
  if (!list.empty()) {
    record = list.back();  // most recently freed first: its pages are the warmest
    list.pop_back();
  } else {
    void* ptr = from_source(size, stream);
    if (ptr == nullptr && stats_.reserved_bytes.all().current > stats_.active_bytes.all().current) {
      release_cached();  // cached blocks of other sizes may make room
      ptr = from_source(size, stream);
    }
    if (ptr == nullptr) throw_oom(nbytes, size, kDefaultStream);
    record = &records_[ptr];
    record->ptr = ptr;
    record->size = size;
  }
  record->allocated = true;
  record->requested = nbytes;
  count_alloc(kPool, size, nbytes);
  trace_event(TraceAction::Alloc, record->ptr, size, nbytes, stream);
  return Block{record->ptr, size, nbytes, stream, record};
}

void* PinnedHostAllocator::from_source(size_t size, StreamId stream) {
  return within_allowed(size) ? obtain_segment(kPool, size, stream) : nullptr;
}

void PinnedHostAllocator::free(const Block& block) {
  if (block.record == nullptr) return;
  auto* record = static_cast<Record*>(block.record);
  std::lock_guard<std::mutex> lock(mutex_);
  internal_check(record->allocated, "free of a pinned block that is not allocated (double free?)");
  record->allocated = false;
  count_free_requested(kPool, record->size);
  // Unlike the device policy, requested bytes drop at once, whether the block waits or not.
  stats_.requested_bytes.decrease(kPool, static_cast<int64_t>(record->requested));
  trace_event(TraceAction::FreeRequested, record->ptr, record->size, record->requested,
              block.stream);
  record->requested = 0;
  // A copy queued on other streams may still read or write the bytes.
  if (deferred_.defer(record)) return;
  make_free(record);
}

void PinnedHostAllocator::make_free(Record* record) {
  record->stream_uses.clear();
  count_free_completed(kPool, record->size, 0);  // requested bytes dropped in free()
  free_lists_[size_class(record->size)].push_back(record);
  trace_event(TraceAction::FreeCompleted, record->ptr, record->size, 0, kDefaultStream);
}

void PinnedHostAllocator::record_stream(const Block& block, StreamId stream) {
  if (block.record == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  deferred_.record_use(static_cast<Record*>(block.record), stream);
}

void PinnedHostAllocator::set_stream_events(StreamEvents* events) {
  std::lock_guard<std::mutex> lock(mutex_);
  deferred_.set_events(events);
}

size_t PinnedHostAllocator::pending_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto& [ptr, record] : records_) n += record.event_count > 0 ? 1 : 0;
  return n;
}

void PinnedHostAllocator::release_cached() {
  deferred_.process([this](Record* done) { make_free(done); });
  for (std::vector<Record*>& list : free_lists_) {
    for (Record* record : list) {
      void* ptr = record->ptr;
      return_segment(kPool, ptr, record->size);
      records_.erase(ptr);
    }
    list.clear();
  }
}

void PinnedHostAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached();
}

std::vector<SegmentSnapshot> PinnedHostAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<SegmentSnapshot> out;
  for (const auto& [ptr, r] : records_) {
    const auto address = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr));
    SegmentSnapshot s;
    s.address = address;
    s.nbytes = r.size;
    const bool pending = !r.allocated && r.event_count > 0;  // freed, waiting on an event
    s.blocks.push_back({address, r.size, r.requested, r.allocated, pending});
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentSnapshot& a, const SegmentSnapshot& b) { return a.address < b.address; });
  return out;
}

}  // namespace memgrad
