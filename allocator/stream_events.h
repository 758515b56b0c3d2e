// Blocks used by other streams: record_stream semantics, shared by the device and host policies.
//
// A block that work on another stream may still read or write must not be handed out again as
// soon as its owner frees it. At the free, one event is recorded on every stream that used the
// block (Tensor::record_stream); the block waits until all of them have completed and only then
// goes back to its pool. The CPU has a single stream and installs no events, so there every free
// is immediate.
#pragma once

#include <algorithm>
#include <deque>
#include <utility>

#include "allocator/stream.h"

namespace memgrad {

// Waits on stream work. The CUDA backend implements it with CUDA events.
class StreamEvents {
 public:
  virtual ~StreamEvents() = default;
  // Records an event on `stream` after the work queued so far; returns its handle.
  virtual void* record(StreamId stream) = 0;
  // Whether the event has completed.
  virtual bool query(void* event) = 0;
  // Blocks until the event has completed.
  virtual void synchronize(void* event) = 0;
  // Destroys the event.
  virtual void release(void* event) = 0;
};

// The freed blocks waiting on events, in the order the events were recorded. `Record` is a
// policy's block record with `std::vector<StreamId> stream_uses` (the other streams that used it)
// and `int event_count` (its events still running). Not thread-safe: the policy's lock guards it.
template <class Record>
class DeferredFrees {
 public:
  DeferredFrees() = default;
  DeferredFrees(const DeferredFrees&) = delete;
  DeferredFrees& operator=(const DeferredFrees&) = delete;
  ~DeferredFrees() {
    for (auto& [event, record] : pending_) events_->release(event);
  }

  // Installs the event provider (not owned). Without one, uses are not recorded.
  void set_events(StreamEvents* events) { events_ = events; }
  bool empty() const { return pending_.empty(); }

  // Notes that work queued on `stream` uses the block.
  void record_use(Record* record, StreamId stream) {
    if (events_ == nullptr) return;
    auto& uses = record->stream_uses;
    if (std::find(uses.begin(), uses.end(), stream) == uses.end()) uses.push_back(stream);
  }

  // At the block's free: records an event on each stream that used it and returns true (the
  // block now waits), or returns false when no other stream used it (it may be freed now).
  bool defer(Record* record) {
    if (record->stream_uses.empty() || events_ == nullptr) return false;
    for (StreamId s : record->stream_uses) {
      pending_.emplace_back(events_->record(s), record);
      ++record->event_count;
    }
    record->stream_uses.clear();
    return true;
  }

  // Calls `free_now(record)` for every block whose last event has completed. Events complete in
  // record order per stream; this stops at the first one still running (one queue for all
  // streams rather than PyTorch's one per stream: simpler, at the cost of some delay).
  template <class FreeNow>
  void process(FreeNow&& free_now) {
    while (!pending_.empty() && events_->query(pending_.front().first)) pop(free_now);
  }

  // Waits for every event, then frees as process() does.
  template <class FreeNow>
  void synchronize(FreeNow&& free_now) {
    while (!pending_.empty()) {
      events_->synchronize(pending_.front().first);
      pop(free_now);
    }
  }

 private:
  template <class FreeNow>
  void pop(FreeNow& free_now) {
    auto [event, record] = pending_.front();
    events_->release(event);
    pending_.pop_front();
    if (--record->event_count == 0) free_now(record);
  }

  StreamEvents* events_ = nullptr;
  std::deque<std::pair<void*, Record*>> pending_;  // (event, block) in record order
};

}  // namespace memgrad
