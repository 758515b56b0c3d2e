// Test helper: stream events completed by hand, to test record_stream without a GPU.
//
//   ManualEvents events;
//   allocator.set_stream_events(&events);
//   ... record_stream, free ...
//   events.done[0] = 1;   // the first event recorded has completed
#pragma once

#include <cstddef>
#include <vector>

#include "allocator/stream_events.h"

namespace memgrad::testing {

struct ManualEvents : StreamEvents {
  std::vector<int> done;          // per event, in record order: 1 once completed
  std::vector<StreamId> streams;  // the stream each event was recorded on
  void* record(StreamId stream) override {
    done.push_back(0);
    streams.push_back(stream);
    return reinterpret_cast<void*>(done.size());
  }
  bool query(void* e) override { return done[reinterpret_cast<size_t>(e) - 1] != 0; }
  void synchronize(void* e) override { done[reinterpret_cast<size_t>(e) - 1] = 1; }
  void release(void*) override {}
};

}  // namespace memgrad::testing
