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

size_t PinnedHostAllocator::round_size(size_t nbytes) {
  return nbytes == 0 ? 0 : std::bit_ceil(nbytes);
}

void PinnedHostAllocator::process_events() {
  deferred_.process([this](Record* done) {
    finish_free(Block{done->ptr, done->size, done->requested, done->stream, kPool, done});
  });
}

Placement PinnedHostAllocator::place(const Request& request) {
  process_events();
  const size_t size = round_size(request.nbytes);
  std::vector<Record*>& list = free_lists_[size_class(size)];
  Record* record = nullptr;
  if (!list.empty()) {
    record = list.back();  // most recently freed first: its pages are the warmest
    list.pop_back();
  } else {
    void* ptr = within_allowed(size) ? obtain_segment(kPool, size, request.stream) : nullptr;
    if (ptr == nullptr) return Placement::refused(size);
    record = &records_[ptr];
    record->ptr = ptr;
    record->size = size;
  }
  record->allocated = true;
  record->requested = request.nbytes;
  record->stream = request.stream;
  return Placement{record->ptr, size, kPool, record};
}

bool PinnedHostAllocator::defer_free(const Block& block) {
  auto* record = static_cast<Record*>(block.record);
  internal_check(record->allocated, "free of a pinned block that is not allocated (double free?)");
  record->allocated = false;
  // A copy queued on other streams may still read or write the bytes.
  return deferred_.defer(record);
}

SplitTally PinnedHostAllocator::take_back(const Block& block) {
  auto* record = static_cast<Record*>(block.record);
  record->stream_uses.clear();
  record->requested = 0;
  free_lists_[size_class(record->size)].push_back(record);
  return {};
}

void PinnedHostAllocator::note_stream_use(const Block& block, StreamId stream) {
  deferred_.record_use(static_cast<Record*>(block.record), stream);
}

void PinnedHostAllocator::set_stream_events(StreamEvents* events) {
  const auto guard = lock();
  deferred_.set_events(events);
}

size_t PinnedHostAllocator::pending_blocks() const {
  const auto guard = lock();
  size_t n = 0;
  for (const auto& [ptr, record] : records_) n += record.event_count > 0 ? 1 : 0;
  return n;
}

bool PinnedHostAllocator::release_cached() {
  process_events();
  bool released = false;
  for (std::vector<Record*>& list : free_lists_) {
    for (Record* record : list) {
      void* ptr = record->ptr;
      return_segment(kPool, ptr, record->size);
      records_.erase(ptr);
      released = true;
    }
    list.clear();
  }
  return released;
}

void PinnedHostAllocator::describe(std::vector<SegmentSnapshot>& out) const {
  for (const auto& [ptr, r] : records_) {
    const auto address = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr));
    SegmentSnapshot s;
    s.address = address;
    s.nbytes = r.size;
    const bool pending = !r.allocated && r.event_count > 0;  // freed, waiting on an event
    s.blocks.push_back({address, r.size, r.requested, r.allocated, pending});
    out.push_back(std::move(s));
  }
}

}  // namespace memgrad
