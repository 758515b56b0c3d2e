// FirstFitAllocator: the lowest-addressed free block that fits, split, and merge on free.
#include "lab/policies/first_fit_allocator.h"

#include "allocator/error.h"
#include "allocator/sizes.h"

namespace memgrad {

FirstFitAllocator::FirstFitAllocator(MemorySource& source, const AllocatorConfig& config)
    : PolicyAllocator(source, config.memory_fraction) {}

// The frame returns the segments' memory.
FirstFitAllocator::~FirstFitAllocator() {
  for (Segment* seg : segments_) {
    for (Rec* r = seg->head; r != nullptr;) {
      Rec* next = r->next;
      delete r;
      r = next;
    }
    delete seg;
  }
}

SplitTally FirstFitAllocator::tally(const Segment& seg) {
  if (seg.live == 0) return {};
  return {static_cast<int64_t>(seg.free_blocks), static_cast<int64_t>(seg.free_bytes)};
}

Placement FirstFitAllocator::place(const Request& request) {
  const size_t size = round_up(request.nbytes, kMinBlockSize);
  Rec* rec = first_fit(size);
  if (rec == nullptr) {
    const size_t segment_size = caching_segment_size(size);
    rec = new_segment(segment_size);
    if (rec == nullptr) return Placement::refused(segment_size);
  }
  return split_off(rec, size, request.nbytes);
}

FirstFitAllocator::Rec* FirstFitAllocator::first_fit(size_t size) const {
  for (Rec* r : free_) {
    if (r->nbytes >= size) return r;
  }
  return nullptr;
}

FirstFitAllocator::Rec* FirstFitAllocator::new_segment(size_t nbytes) {
  const StatPool pool = pool_of_segment(nbytes);
  void* ptr = obtain_segment(pool, nbytes);
  if (ptr == nullptr) return nullptr;
  auto* seg = new Segment{static_cast<char*>(ptr), nbytes, pool};
  auto* rec = new Rec{seg->ptr, nbytes, 0, false, seg, nullptr, nullptr};
  seg->head = rec;
  segments_.insert(seg);
  add_free(rec);
  return rec;
}

void FirstFitAllocator::add_free(Rec* rec) {
  free_.insert(rec);
  ++rec->segment->free_blocks;
  rec->segment->free_bytes += rec->nbytes;
}

void FirstFitAllocator::remove_free(Rec* rec) {
  free_.erase(rec);
  --rec->segment->free_blocks;
  rec->segment->free_bytes -= rec->nbytes;
}

Placement FirstFitAllocator::split_off(Rec* rec, size_t size, size_t requested) {
  Segment& seg = *rec->segment;
  const SplitTally before = tally(seg);
  remove_free(rec);
  if (rec->nbytes > size) {
    // Sizes are multiples of 512, so the rest is always a usable block: split it off.
    auto* rest = new Rec{rec->ptr + size, rec->nbytes - size, 0, false, &seg, rec, rec->next};
    if (rest->next != nullptr) rest->next->prev = rest;
    rec->next = rest;
    rec->nbytes = size;
    add_free(rest);
  }
  rec->allocated = true;
  rec->requested = requested;
  ++seg.live;
  return Placement{rec->ptr, size, seg.pool, rec, tally(seg) - before};
}

FirstFitAllocator::Rec* FirstFitAllocator::merge(Rec* left, Rec* right) {
  left->nbytes += right->nbytes;
  left->next = right->next;
  if (right->next != nullptr) right->next->prev = left;
  delete right;
  return left;
}

SplitTally FirstFitAllocator::take_back(const Block& block) {
  auto* rec = static_cast<Rec*>(block.record);
  internal_check(rec->allocated, "first_fit: free of a block that is not allocated (double free?)");
  Segment& seg = *rec->segment;
  const SplitTally before = tally(seg);
  rec->allocated = false;
  --seg.live;
  rec->requested = 0;
  if (rec->next != nullptr && !rec->next->allocated) {
    remove_free(rec->next);
    merge(rec, rec->next);
  }
  if (rec->prev != nullptr && !rec->prev->allocated) {
    Rec* prev = rec->prev;
    remove_free(prev);
    rec = merge(prev, rec);
  }
  add_free(rec);
  return tally(seg) - before;
}

bool FirstFitAllocator::release_cached() {
  bool released = false;
  for (auto it = segments_.begin(); it != segments_.end();) {
    Segment* seg = *it;
    if (seg->live > 0) {
      ++it;
      continue;
    }
    remove_free(seg->head);  // a segment with nothing allocated is one free block
    delete seg->head;
    return_segment(seg->pool, seg->ptr, seg->nbytes);
    it = segments_.erase(it);
    delete seg;
    released = true;
  }
  return released;
}

void FirstFitAllocator::describe(std::vector<SegmentSnapshot>& out) const {
  for (const Segment* seg : segments_) {
    SegmentSnapshot s = segment_at(seg->ptr, seg->nbytes, seg->pool);
    for (const Rec* r = seg->head; r != nullptr; r = r->next) {
      s.blocks.push_back({trace_address(r->ptr), r->nbytes, r->requested, r->allocated, false});
    }
    out.push_back(std::move(s));
  }
}

}  // namespace memgrad
