// Reading a memory snapshot back as a request stream, and comparing segment decisions.
//
// The request stream of one device is its trace's allocs, each freed at its free_completed
// (the point the block really returns to the pool; free_requested differs only under
// record_stream). Blocks the trace never allocates but frees, or that are live in `segments` at
// the end, were allocated before history began (or lost when the ring buffer wrapped): they come
// first, as allocations at time zero, in address order. PyTorch records no event for
// empty_cache(); a run of segment_free events that neither an alloc nor a segment_alloc follows
// is taken as one (inside malloc, PyTorch frees cached segments only right before it retries a
// segment allocation or serves the request from the cache).
//
// A pickle is read with its trace streamed (import_snapshot_pickle): the reader hands each entry
// of device_traces[d] over as soon as it is complete, and it is kept as a 32-byte RecordedEvent
// rather than as its dict (about 390 bytes), so the importer holds less than two times the file
// at its peak rather than the fourteen a whole tree took.
#include "interop/snapshot_import.h"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "allocator/caching_allocator.h"
#include "allocator/sizes.h"
#include "interop/allocator_settings.h"
#include "interop/error.h"
#include "interop/pickle_reader.h"

namespace memgrad {
namespace {

// Every address and size of a snapshot must be an int in [0, 2^62]: far from overflow in the
// sums below, and above any device's memory.
constexpr int64_t kMaxField = int64_t{1} << 62;
// Where the requests that ran out of memory are placed: above every address a snapshot holds.
constexpr uint64_t kFailedRequestAddress = uint64_t{1} << 63;
// The most distinct streams a trace may have (PyTorch uses a few dozen per device).
constexpr size_t kMaxStreams = size_t{1} << 24;

// Where a value is, for messages: "segments[3]", or device_traces[d][i], which is formatted only
// when a message needs it (a trace has millions of entries).
class Place {
 public:
  Place(const char* text) : text_(text) {}
  Place(const std::string& text) : text_(text) {}
  Place(size_t device, size_t entry) : device_(device), entry_(entry), in_trace_(true) {}
  std::string str() const {
    return in_trace_ ? fmt::format("device_traces[{}][{}]", device_, entry_) : std::string(text_);
  }

 private:
  std::string_view text_;
  size_t device_ = 0;
  size_t entry_ = 0;
  bool in_trace_ = false;
};

// Reads dict[key] as an int in [0, kMaxField]; TraceError naming `where`, the key and the value.
uint64_t field(const PyValue& dict, std::string_view key, const Place& where) {
  const PyValue* v = dict.find(key);
  if (v == nullptr)
    throw TraceError(fmt::format("{}: no \"{}\"", where.str(), key), where.str(), std::string(key));
  if (v->kind() != PyValue::Kind::Int) {
    throw TraceError(
        fmt::format("{}: \"{}\" is a {}, expected an int", where.str(), key, v->kind_name()),
        where.str(), std::string(key));
  }
  const int64_t n = v->as_int();
  if (n < 0 || n > kMaxField) {
    throw TraceError(
        fmt::format("{}: \"{}\" is {}, expected an int in [0, 2^62]", where.str(), key, n),
        where.str(), std::string(key));
  }
  return static_cast<uint64_t>(n);
}

// A stream id: PyTorch writes the cudaStream_t value (a pointer, or 0 for the default stream).
StreamId stream_of(const PyValue& dict, const Place& where) {
  const PyValue* v = dict.find("stream");
  if (v == nullptr || v->is_none()) return kDefaultStream;
  if (v->kind() != PyValue::Kind::Int) {
    throw TraceError(
        fmt::format("{}: \"stream\" is a {}, expected an int", where.str(), v->kind_name()),
        where.str(), "stream");
  }
  return static_cast<StreamId>(v->as_int());
}

const PyValue::Items& list_at(const PyValue& dict, std::string_view key, const Place& where) {
  const PyValue* v = dict.find(key);
  if (v == nullptr)
    throw TraceError(fmt::format("{}: no \"{}\"", where.str(), key), where.str(), std::string(key));
  if (v->kind() != PyValue::Kind::List && v->kind() != PyValue::Kind::Tuple) {
    throw TraceError(
        fmt::format("{}: \"{}\" is a {}, expected a list", where.str(), key, v->kind_name()),
        where.str(), std::string(key));
  }
  return v->items();
}

const PyValue& dict_item(const PyValue& v, const Place& where) {
  if (v.kind() != PyValue::Kind::Dict) {
    throw TraceError(fmt::format("{}: a {}, expected a dict", where.str(), v.kind_name()),
                     where.str());
  }
  return v;
}

// The context of an event: memgrad writes one synthetic frame (op, phase / label); PyTorch's
// frames are a stack, whose first entry (the innermost call) stands for it here.
TraceContextRecord context_of(const PyValue& e) {
  const PyValue* frames = e.find("frames");
  if (frames == nullptr ||
      (frames->kind() != PyValue::Kind::List && frames->kind() != PyValue::Kind::Tuple) ||
      frames->items().empty()) {
    return {};
  }
  const auto text = [](const PyValue& frame, std::string_view key) -> std::string {
    const PyValue* v = frame.kind() == PyValue::Kind::Dict ? frame.find(key) : nullptr;
    return v != nullptr && v->kind() == PyValue::Kind::Str ? v->as_str() : std::string();
  };
  // memgrad's frames say which part of the context each is (memory_snapshot.cpp)...
  TraceContextRecord c;
  bool memgrads = true;
  for (const PyValue& frame : frames->items()) {
    const std::string kind = text(frame, "filename"), name = text(frame, "name");
    if (kind == "op") {
      c.op = name;
    } else if (kind == "module") {
      c.module = name;
    } else if (kind == "phase") {
      c.phase = name;
    } else if (kind == "label") {
      c.label = name;
    } else if (kind != "memgrad") {
      memgrads = false;
    }
  }
  if (memgrads) return c;
  // ...PyTorch's are source lines: the innermost names the place.
  const PyValue& innermost = frames->items().front();
  return {text(innermost, "name"), text(innermost, "filename"), "", ""};
}

// The contexts and the streams of a trace's entries, each distinct one once.
class ContextTable {
 public:
  uint32_t intern(TraceContextRecord c) {
    const auto key = std::make_tuple(c.phase, c.op, c.label, c.module);
    const auto it = index_.find(key);
    if (it != index_.end()) return it->second;
    records_.push_back(std::move(c));
    return index_[key] = static_cast<uint32_t>(records_.size() - 1);
  }
  // The context of the trace entry `e`. Entries that share their frames object (memgrad's
  // pickles share one per context) are looked up once per run of them: the object held here
  // cannot change or give its address to another.
  uint32_t intern_entry(const PyValue& e) {
    const PyValue* frames = e.find("frames");
    if (frames != nullptr && frames->identity() != nullptr &&
        frames->identity() == last_frames_.identity()) {
      return last_context_;
    }
    const uint32_t context = intern(context_of(e));
    if (frames != nullptr) {
      last_frames_ = *frames;
      last_context_ = context;
    }
    return context;
  }
  std::vector<TraceContextRecord> take() { return std::move(records_); }

  // The number of `stream` among the distinct streams, at most kMaxStreams of them (a
  // RecordedEvent holds 24 bits); TraceError naming `where` for one more.
  uint32_t intern_stream(StreamId stream, const Place& where) {
    if (!streams_.empty() && streams_[last_stream_] == stream) return last_stream_;
    const auto [it, added] = stream_index_.try_emplace(stream, streams_.size());
    if (added) {
      if (streams_.size() == kMaxStreams) {
        throw TraceError(fmt::format("{}: more than {} distinct streams", where.str(), kMaxStreams),
                         where.str());
      }
      streams_.push_back(stream);
    }
    last_stream_ = it->second;
    return last_stream_;
  }
  StreamId stream(uint32_t index) const { return streams_[index]; }

 private:
  std::map<std::tuple<std::string, std::string, std::string, std::string>, uint32_t> index_;
  std::vector<TraceContextRecord> records_;
  PyValue last_frames_;        // the frames object of the last entry interned
  uint32_t last_context_ = 0;  // and its context
  std::unordered_map<StreamId, uint32_t> stream_index_;
  std::vector<StreamId> streams_;  // in order of first use
  uint32_t last_stream_ = 0;       // the last one interned
};

// ---- the trace -> requests ----

// Reserved bytes as segment events move them: 128-bit, so no sequence of sizes up to 2^62 can
// wrap them. A count above 2^62 bytes is no device's: TraceError naming `where`.
__extension__ using ReservedBytes = __int128;  // __extension__: GCC's, not ISO C++

void check_reserved(ReservedBytes reserved, const Place& where) {
  if (reserved > kMaxField) {
    throw TraceError(fmt::format("{}: more than 2^62 bytes reserved at once (no device holds "
                                 "that; the sizes are corrupt)",
                                 where.str()),
                     where.str());
  }
}

struct LiveBlock {
  uint64_t size = 0;  // requested bytes
  StreamId stream = kDefaultStream;
  uint64_t block_size = 0;  // the block's bytes, when the final segments say (0: unknown)
};

// A segment of the device at the end of the history, as `segments` lists it.
struct FinalSegment {
  uint64_t address = 0;
  uint64_t nbytes = 0;
  StreamId stream = kDefaultStream;
  bool small_pool = false;
  bool expandable = false;
};

// The blocks active at the end on `device` (address -> requested bytes) and notes on pools.
std::map<uint64_t, LiveBlock> final_live_blocks(const PyValue::Items& segments, int device,
                                                ImportedSnapshot& out,
                                                std::vector<FinalSegment>& finals) {
  std::map<uint64_t, LiveBlock> live;
  size_t private_pools = 0;
  for (size_t s = 0; s < segments.size(); ++s) {
    const std::string where = fmt::format("segments[{}]", s);
    const PyValue& seg = dict_item(segments[s], where);
    if (static_cast<int>(field(seg, "device", where)) != device) continue;
    uint64_t address = field(seg, "address", where);
    const uint64_t total = field(seg, "total_size", where);
    out.recorded_peak_reserved += total;  // reserved at the end, for now (each total <= 2^62)
    check_reserved(out.recorded_peak_reserved, where);
    const PyValue* pool = seg.find("segment_pool_id");
    if (pool != nullptr &&
        (pool->kind() == PyValue::Kind::Tuple || pool->kind() == PyValue::Kind::List)) {
      for (const PyValue& id : pool->items()) {
        if (id.kind() == PyValue::Kind::Int && id.as_int() != 0) {
          ++private_pools;
          break;
        }
      }
    }
    const StreamId stream = stream_of(seg, where);
    const PyValue* type = seg.find("segment_type");
    const PyValue* expandable = seg.find("is_expandable");
    finals.push_back({address, total, stream,
                      type != nullptr && type->kind() == PyValue::Kind::Str
                          ? type->as_str() == "small"
                          : total == kSmallBuffer,
                      expandable != nullptr && expandable->kind() == PyValue::Kind::Bool &&
                          expandable->as_bool()});
    const PyValue::Items& blocks = list_at(seg, "blocks", where);
    for (size_t b = 0; b < blocks.size(); ++b) {
      const std::string bwhere = fmt::format("{}.blocks[{}]", where, b);
      const PyValue& block = dict_item(blocks[b], bwhere);
      const uint64_t size = field(block, "size", bwhere);
      if (size > total - std::min(total, address - field(seg, "address", where))) {
        throw TraceError(fmt::format("{}: the blocks up to this one hold more than the segment's "
                                     "total_size, {}",
                                     bwhere, total),
                         bwhere, "size");
      }
      const PyValue* state = block.find("state");
      const bool active =
          state != nullptr && state->kind() == PyValue::Kind::Str && state->as_str() != "inactive";
      if (active) {
        const uint64_t requested =
            block.find("requested_size") != nullptr ? field(block, "requested_size", bwhere) : size;
        live[address] = {requested, stream, size};
      }
      address += size;
    }
    if (address - field(seg, "address", where) != total) {
      throw TraceError(fmt::format("{}: block sizes sum to {}, total_size is {}", where,
                                   address - field(seg, "address", where), total),
                       where, "total_size");
    }
  }
  if (private_pools > 0) {
    out.notes.push_back(
        fmt::format("{} segments belong to private pools (CUDA graphs, MemPool): "
                    "their requests are replayed in the default pool",
                    private_pools));
  }
  return live;
}

std::optional<TraceAction> action_of(const std::string& name) {
  for (TraceAction a :
       {TraceAction::Alloc, TraceAction::FreeRequested, TraceAction::FreeCompleted,
        TraceAction::SegmentAlloc, TraceAction::SegmentFree, TraceAction::SegmentMap,
        TraceAction::SegmentUnmap, TraceAction::Oom, TraceAction::Snapshot}) {
    if (trace_action_name(a) == name) return a;
  }
  return std::nullopt;
}

bool is_segment_action(TraceAction a) {
  return a == TraceAction::SegmentAlloc || a == TraceAction::SegmentFree ||
         a == TraceAction::SegmentMap || a == TraceAction::SegmentUnmap;
}

// One trace entry as the import keeps it until the request stream is built: 32 bytes, where a
// TraceEvent takes 72 and the entry's dict about 390.
struct RecordedEvent {
  uint64_t address = 0;  // for oom: the device's free bytes (device_free)
  uint64_t nbytes = 0;
  int64_t time_ns = 0;
  uint32_t context = 0;      // index into the ContextTable that read the entry
  uint32_t stream : 24 = 0;  // index into that table's streams
  TraceAction action : 8 = TraceAction::Alloc;
};
static_assert(sizeof(RecordedEvent) == 32);
// A deque grows by blocks: a vector's growth would hold the events read so far twice.
using RecordedEvents = std::deque<RecordedEvent>;

// The entries of a trace that are no request and no segment decision, counted.
struct Markers {
  size_t snapshots = 0;     // `snapshot`: _snapshot() called while recording (addr 0, size the
                            // active bytes then); the replay has nothing to do there
  size_t user_defined = 0;  // `user_defined`: the program's own annotations
};

// One trace entry (free_completed kept as FreeCompleted for now, oom's device_free in `address`
// as memgrad records it), or nullopt for a snapshot or user_defined marker, which is no request
// (counted in `markers`; a snapshot entry's addr and size are checked all the same). Throws
// TraceError naming `where`, the field and its value.
std::optional<RecordedEvent> read_event(const PyValue& item, const Place& where,
                                        ContextTable& contexts, Markers& markers) {
  const PyValue& e = dict_item(item, where);
  const PyValue* name = e.find("action");
  if (name == nullptr || name->kind() != PyValue::Kind::Str) {
    throw TraceError(fmt::format("{}: no \"action\" string", where.str()), where.str(), "action");
  }
  const std::optional<TraceAction> action = action_of(name->as_str());
  if (!action) {
    if (name->as_str() == "user_defined") {
      ++markers.user_defined;
      return std::nullopt;
    }
    throw TraceError(fmt::format("{}: unknown action '{}'", where.str(), name->as_str()),
                     where.str(), "action");
  }
  if (*action == TraceAction::Snapshot) {
    (void)field(e, "addr", where);
    (void)field(e, "size", where);
    ++markers.snapshots;
    return std::nullopt;
  }
  RecordedEvent t;
  t.action = *action;
  t.stream = contexts.intern_stream(stream_of(e, where), where);
  t.address =
      *action == TraceAction::Oom ? field(e, "device_free", where) : field(e, "addr", where);
  t.nbytes = field(e, "size", where);
  if (t.action == TraceAction::Alloc && t.nbytes > (uint64_t{1} << 60)) {
    throw TraceError(
        fmt::format("{}: an allocation of {} bytes (above 1 EiB)", where.str(), t.nbytes),
        where.str(), "size");
  }
  const PyValue* time = e.find("time_us");
  if (time != nullptr && time->kind() == PyValue::Kind::Int && time->as_int() >= 0 &&
      time->as_int() < kMaxField / 1000) {
    t.time_ns = time->as_int() * 1000;
  }
  t.context = contexts.intern_entry(e);
  return t;
}

// The entries of each device_traces[d], read into RecordedEvents as the pickle reader hands them
// over (their dicts are freed at once). An entry that cannot be read is kept as it is and the
// rest of its list dropped: the import stops there, with that entry's error, as it would
// reading the list whole. Nothing is thrown here, where the import has checked nothing else.
class TraceSink : public PickleItemSink {
 public:
  struct Trace {
    size_t entries = 0;  // entries taken: events, markers and the unread one
    Markers markers;     // snapshot and user_defined markers among them
    RecordedEvents events;
    ContextTable contexts;  // their contexts and streams, numbered as reading the list does
    std::optional<size_t> unread_index;  // the first entry that could not be read, if any
    PyValue unread;
  };

  std::string_view key() const override { return "device_traces"; }
  void take(size_t list, PyValue item) override {
    Trace& t = traces_[list];
    const size_t index = t.entries++;
    if (t.unread_index) return;
    try {
      const std::optional<RecordedEvent> e =
          read_event(item, Place(list, index), t.contexts, t.markers);
      if (e) t.events.push_back(*e);
    } catch (const TraceError&) {
      t.unread_index = index;
      t.unread = std::move(item);
    }
  }
  // The entries taken from device_traces[d], or nullptr when there were none.
  Trace* trace(size_t d) {
    const auto it = traces_.find(d);
    return it == traces_.end() ? nullptr : &it->second;
  }

 private:
  std::map<size_t, Trace> traces_;
};

// The number of entries of device_traces[d]: those the sink took, else the list's.
size_t entry_count(const PyValue::Items& traces, size_t d, TraceSink* streamed) {
  if (streamed != nullptr) {
    if (const TraceSink::Trace* t = streamed->trace(d)) return t->entries;
  }
  return traces[d].items().size();
}

int choose_device(const PyValue::Items& traces, std::optional<int> device, TraceSink* streamed,
                  std::vector<std::string>& notes) {
  if (device) {
    if (*device < 0 || static_cast<size_t>(*device) >= traces.size()) {
      throw TraceError(
          fmt::format("device_traces: no device {} (the snapshot has {})", *device, traces.size()),
          "device_traces");
    }
    return *device;
  }
  int best = 0;
  size_t with_events = 0;
  for (size_t d = 0; d < traces.size(); ++d) {
    const size_t n = traces[d].kind() == PyValue::Kind::List ? entry_count(traces, d, streamed) : 0;
    with_events += n > 0 ? 1 : 0;
    if (n > entry_count(traces, static_cast<size_t>(best), streamed)) best = static_cast<int>(d);
  }
  if (with_events > 1) {
    notes.push_back(
        fmt::format("{} devices have events: device {} (the most) is replayed; "
                    "choose another with --device",
                    with_events, best));
  }
  return best;
}

// The recorded events of device `device`, whose list is `trace`: taken from the sink when it
// streamed them, else read from the list; their contexts and streams numbered in `contexts`.
RecordedEvents read_events(const PyValue& trace, int device, TraceSink* streamed,
                           ContextTable& contexts, ImportedSnapshot& out) {
  RecordedEvents events;
  Markers markers;
  const size_t d = static_cast<size_t>(device);
  if (TraceSink::Trace* taken = streamed != nullptr ? streamed->trace(d) : nullptr) {
    if (taken->unread_index) {
      // Every entry before it was read: this one throws its error again, here.
      (void)read_event(taken->unread, Place(d, *taken->unread_index), taken->contexts, markers);
      internal_check(false, "a trace entry the sink could not read was read");
    }
    events = std::move(taken->events);
    markers = taken->markers;
    contexts = std::move(taken->contexts);
  } else {
    const PyValue::Items& items = trace.items();
    for (size_t i = 0; i < items.size(); ++i) {
      const std::optional<RecordedEvent> e = read_event(items[i], Place(d, i), contexts, markers);
      if (e) events.push_back(*e);
    }
  }
  std::set<uint32_t> streams;
  for (const RecordedEvent& e : events) {
    if (e.action == TraceAction::Alloc) streams.insert(e.stream);
  }
  // A snapshot entry needs no note: nothing happened there that the replay leaves out.
  out.snapshot_markers = markers.snapshots;
  if (markers.user_defined > 0) {
    out.notes.push_back(
        fmt::format("{} user_defined annotations skipped (not requests)", markers.user_defined));
  }
  if (streams.size() > 1) {
    out.notes.push_back(
        fmt::format("{} streams allocate: each is replayed as its own stream; "
                    "frees take effect at free_completed (record_stream waits "
                    "are not modelled)",
                    streams.size()));
  }
  return events;
}

TraceEvent trace_event_of(const RecordedEvent& r, const ContextTable& table) {
  TraceEvent t;
  t.action = r.action;
  t.stream = table.stream(r.stream);
  t.time_ns = r.time_ns;
  t.address = r.address;
  t.nbytes = r.nbytes;
  t.requested = is_segment_action(r.action) || r.action == TraceAction::Oom ? 0 : r.nbytes;
  t.context = r.context;
  return t;
}

// +nbytes for an event that reserves, -nbytes for one that releases, 0 for the others.
ReservedBytes reserved_change(const RecordedEvent& e) {
  if (e.action == TraceAction::SegmentAlloc || e.action == TraceAction::SegmentMap) {
    return static_cast<ReservedBytes>(e.nbytes);
  }
  if (e.action == TraceAction::SegmentFree || e.action == TraceAction::SegmentUnmap) {
    return -static_cast<ReservedBytes>(e.nbytes);
  }
  return 0;
}

// The reserved bytes as a size (a negative count, from a trace that releases more than it
// reserved, is 0).
size_t reserved_size(ReservedBytes reserved) {
  return static_cast<size_t>(std::max<ReservedBytes>(reserved, 0));
}

// The most reserved bytes the segment events reach from `start` (TraceError above 2^62).
size_t peak_reserved(const RecordedEvents& events, size_t start) {
  ReservedBytes reserved = static_cast<ReservedBytes>(start), peak = reserved;
  for (const RecordedEvent& e : events) {
    reserved += reserved_change(e);
    if (reserved > peak) {
      peak = reserved;
      check_reserved(peak, "device_traces (the segment events from the start)");
    }
  }
  return reserved_size(peak);
}

// What released the run of segment frees (or unmaps) starting at `first`:
// - OwnRelease: under a policy that gives a segment back when its block is freed (passthrough,
//   and planned before its plan; the caching policy and the lab's others keep free segments
//   until empty_cache() or a failed segment allocation), the segment_free follows that block's
//   free_completed; the stitch policy (`moves_pages`) unmaps free pages and maps as many bytes
//   or more right after, for the request it serves; garbage collection frees and then serves a
//   request from the cache (only with a threshold);
// - Retry: a retry after a failed segment allocation frees cached segments and then obtains one
//   that would not have fitted (`reserved` + its size above `limit`);
// - EmptyCache: anything else freed cached segments on request.
enum class Release { EmptyCache, Retry, OwnRelease };

Release release_of(const RecordedEvents& events, size_t first, size_t reserved, size_t limit,
                   bool garbage_collection, bool releases_on_free, bool moves_pages) {
  if (releases_on_free && first > 0 && events[first - 1].action == TraceAction::FreeCompleted &&
      events[first - 1].address == events[first].address) {
    return Release::OwnRelease;
  }
  size_t next = first;
  ReservedBytes released = 0;
  while (next < events.size() && (events[next].action == TraceAction::SegmentFree ||
                                  events[next].action == TraceAction::SegmentUnmap ||
                                  events[next].action == TraceAction::Oom)) {
    if (events[next].action != TraceAction::Oom) released += events[next].nbytes;
    ++next;
  }
  if (next == events.size()) return Release::EmptyCache;
  const RecordedEvent& after = events[next];
  if (moves_pages && after.action == TraceAction::SegmentMap) {
    ReservedBytes mapped = 0;
    for (size_t i = next; i < events.size() && events[i].action == TraceAction::SegmentMap; ++i) {
      mapped += events[i].nbytes;
    }
    if (mapped >= released) return Release::OwnRelease;
  }
  if (after.action == TraceAction::SegmentAlloc || after.action == TraceAction::SegmentMap) {
    return reserved + after.nbytes <= limit ? Release::EmptyCache : Release::Retry;
  }
  if (after.action == TraceAction::Alloc && garbage_collection) return Release::OwnRelease;
  return Release::EmptyCache;
}

// At least as many requests as import_tree makes of `recorded` after `before` blocks: one per
// event but free_requested, one more per oom, one more per run of segment frees (empty_cache).
size_t request_bound(const RecordedEvents& recorded, size_t before) {
  size_t bound = before;
  bool releasing = false;
  for (const RecordedEvent& e : recorded) {
    const bool releases =
        e.action == TraceAction::SegmentFree || e.action == TraceAction::SegmentUnmap;
    bound += (e.action != TraceAction::FreeRequested) + (e.action == TraceAction::Oom) +
             (releases && !releasing);
    releasing = releases;
  }
  return bound;
}

// The segments and blocks the history starts from: the final segments, less those the history
// obtained and plus those it released (walked back from the end, as PyTorch's viewer does), each
// tiled by the blocks live before the history and free gaps between them. A block freed within
// the history without its allocation has its requested bytes rounded as the caching policy rounds
// them (the final segments give the others' sizes). nullopt, with out.start_note saying why, when
// the history cannot be walked back exactly: expandable segments (mapped page by page), a segment
// event the final segments contradict, a block outside every segment or overlapping another.
std::optional<StartState> start_state(const std::vector<FinalSegment>& finals,
                                      const RecordedEvents& recorded, const ContextTable& contexts,
                                      const std::map<uint64_t, LiveBlock>& before,
                                      ImportedSnapshot& out) {
  const auto give_up = [&](std::string why) -> std::optional<StartState> {
    out.start_note = std::move(why);
    return std::nullopt;
  };
  if (out.config.policy != "caching") {
    return give_up(fmt::format("recorded with {}: only the caching policy's segments are rebuilt",
                               out.config.to_string()));
  }
  std::map<uint64_t, FinalSegment> segments;
  for (const FinalSegment& f : finals) {
    if (f.expandable) return give_up("expandable segments are mapped page by page");
    segments[f.address] = f;
  }
  for (auto e = recorded.rbegin(); e != recorded.rend(); ++e) {
    if (e->action == TraceAction::SegmentMap || e->action == TraceAction::SegmentUnmap) {
      return give_up("expandable segments are mapped page by page");
    }
    if (e->action == TraceAction::SegmentAlloc) {
      const auto it = segments.find(e->address);
      if (it == segments.end() || it->second.nbytes != e->nbytes) {
        return give_up(
            fmt::format("a segment_alloc of {} bytes at {:#x} that the final segments "
                        "do not hold",
                        e->nbytes, e->address));
      }
      segments.erase(it);
    } else if (e->action == TraceAction::SegmentFree) {
      if (segments.contains(e->address)) {
        return give_up(fmt::format("a segment_free at {:#x}, a segment held then", e->address));
      }
      segments[e->address] = {e->address, e->nbytes, contexts.stream(e->stream),
                              e->nbytes == kSmallBuffer, false};
    }
  }
  StartState start;
  std::map<uint64_t, size_t> event_of;  // a block from before the history -> its Alloc event
  for (const auto& [address, block] : before) event_of.emplace(address, event_of.size());
  auto block = before.begin();
  for (const auto& [address, seg] : segments) {
    if (block != before.end() && block->first < address) {
      return give_up(
          fmt::format("a block at {:#x}, from before the history, is in no segment", block->first));
    }
    SeedSegment seed{seg.nbytes, seg.stream, seg.small_pool, {}};
    uint64_t at = address;
    const uint64_t end = address + seg.nbytes;
    for (; block != before.end() && block->first < end; ++block) {
      const LiveBlock& b = block->second;
      const uint64_t nbytes =
          b.block_size > 0 ? b.block_size : CachingAllocator::round_size(b.size, out.config);
      if (block->first < at || nbytes > end - block->first) {
        return give_up(
            fmt::format("the block at {:#x} ({} bytes) overlaps another or its "
                        "segment's end",
                        block->first, nbytes));
      }
      if (block->first > at) seed.blocks.push_back({block->first - at, 0, false});
      seed.blocks.push_back({nbytes, b.size, true});
      start.alloc_events.push_back(event_of.at(block->first));
      at = block->first + nbytes;
    }
    if (at < end) seed.blocks.push_back({end - at, 0, false});
    // A gap that is no multiple of 512 bytes cannot be a block.
    for (const SeedBlock& s : seed.blocks) {
      if (s.nbytes % kMinBlockSize != 0) {
        return give_up(
            fmt::format("the segment at {:#x} would hold a block of {} bytes, not a "
                        "multiple of {}",
                        address, s.nbytes, kMinBlockSize));
      }
    }
    start.segments.push_back(std::move(seed));
    start.addresses.push_back(address);
  }
  if (block != before.end()) {
    return give_up(
        fmt::format("a block at {:#x}, from before the history, is in no segment", block->first));
  }
  return start;
}

// import_snapshot, with the entries of device_traces[d] taken from `streamed` where it took them.
ImportedSnapshot import_tree(const PyValue& snapshot, std::optional<int> device,
                             TraceSink* streamed) {
  ImportedSnapshot out;
  if (snapshot.kind() != PyValue::Kind::Dict) {
    throw TraceError(
        fmt::format("snapshot: a {}, expected a dict with \"segments\" and "
                    "\"device_traces\"",
                    snapshot.kind_name()));
  }
  const PyValue::Items& segments = list_at(snapshot, "segments", "snapshot");
  const PyValue::Items& traces = list_at(snapshot, "device_traces", "snapshot");
  out.device = choose_device(traces, device, streamed, out.notes);
  out.device_name = fmt::format("cuda:{}", out.device);
  if (const PyValue* info = snapshot.find("memgrad"); info && info->kind() == PyValue::Kind::Dict) {
    if (const PyValue* n = info->find("device"); n && n->kind() == PyValue::Kind::Str) {
      out.device_name = n->as_str();
    }
    if (info->find("capacity") != nullptr) out.capacity = field(*info, "capacity", "memgrad");
  }
  read_allocator_settings(snapshot.find("allocator_settings"), out.config, out.notes);
  std::vector<FinalSegment> finals;
  std::map<uint64_t, LiveBlock> live_at_end = final_live_blocks(segments, out.device, out, finals);
  out.segments_at_end = finals.size();
  out.reserved_at_end = out.recorded_peak_reserved;
  if (traces.empty())
    throw TraceError("device_traces: empty (no history was recorded)", "device_traces");
  const PyValue& trace_value = traces[static_cast<size_t>(out.device)];
  if (trace_value.kind() != PyValue::Kind::List) {
    throw TraceError(fmt::format("device_traces[{}]: a {}, expected a list", out.device,
                                 trace_value.kind_name()),
                     fmt::format("device_traces[{}]", out.device));
  }
  ContextTable contexts;
  const RecordedEvents recorded = read_events(trace_value, out.device, streamed, contexts, out);
  out.history_events = recorded.size();

  // Blocks from before the history: freed without an alloc, or live at the end without one.
  std::map<uint64_t, LiveBlock> before;  // address -> size, in address order
  std::unordered_map<uint64_t, bool> allocated;
  for (const RecordedEvent& e : recorded) {
    if (e.action == TraceAction::Alloc) allocated[e.address] = true;
    if (e.action == TraceAction::FreeCompleted) {
      const auto it = allocated.find(e.address);
      if (it == allocated.end() || !it->second) {
        before[e.address] = {e.nbytes, contexts.stream(e.stream)};
        ++out.frees_before_history;
      } else {
        it->second = false;
      }
    }
  }
  for (const auto& [address, block] : live_at_end) {
    const auto it = allocated.find(address);
    if (it == allocated.end() || !it->second) before[address] = block;
  }
  out.live_before_history = before.size();
  out.events.reserve(request_bound(recorded, before.size()));
  for (const auto& [address, block] : before) {
    out.events.push_back({TraceAction::Alloc, block.stream, 0, address, block.size, block.size, 0,
                          0, contexts.intern({"before history", "", "", ""})});
  }
  out.start = start_state(finals, recorded, contexts, before, out);

  // The requests, with empty_cache() where a burst of segment frees shows one, and the peak of
  // the reserved bytes the segment events imply (walked back from the end).
  ReservedBytes reserved = static_cast<ReservedBytes>(out.recorded_peak_reserved);
  for (const RecordedEvent& e : recorded) reserved -= reserved_change(e);
  check_reserved(reserved, "the start of device_traces (the segments walked back)");
  out.recorded_peak_reserved = reserved_size(reserved);
  const size_t whole_peak = peak_reserved(recorded, out.recorded_peak_reserved);
  // What the device let the allocator reserve: its capacity x fraction when known, else the
  // most it ever reserved.
  const size_t limit =
      out.capacity > 0
          ? static_cast<size_t>(static_cast<double>(out.capacity) * out.config.memory_fraction)
          : whole_peak;
  size_t retries = 0;
  for (size_t i = 0; i < recorded.size(); ++i) {
    TraceEvent e = trace_event_of(recorded[i], contexts);
    const auto releases = [](TraceAction a) {
      return a == TraceAction::SegmentFree || a == TraceAction::SegmentUnmap;
    };
    if (releases(e.action) && (i == 0 || !releases(recorded[i - 1].action))) {
      const Release release =
          release_of(recorded, i, reserved_size(reserved), limit,
                     out.config.garbage_collection_threshold > 0.0,
                     out.config.policy == "passthrough" || out.config.policy == "planned",
                     out.config.policy == "stitch");
      if (release == Release::EmptyCache) {
        out.events.push_back(
            {TraceAction::EmptyCache, kDefaultStream, e.time_ns, 0, 0, 0, 0, 0, e.context});
      }
      retries += release == Release::Retry ? 1 : 0;
    }
    if (e.action == TraceAction::Oom && !out.recorded_oom) {
      out.recorded_oom = true;
      out.segments_before_oom = out.recorded_segments.size();
    }
    if (e.action == TraceAction::Oom && out.capacity == 0) {
      out.capacity = reserved_size(reserved) + e.address;
      out.notes.push_back(
          fmt::format("the device's capacity is not recorded: taken as the "
                      "reserved bytes at the first OOM plus its device_free, {} "
                      "bytes",
                      out.capacity));
    }
    if (e.action == TraceAction::Oom) {
      // The request that failed is a request all the same: replayed as an allocation (at an
      // address no block has), which a policy that can serve it keeps to the end.
      out.events.push_back({TraceAction::Alloc, e.stream, e.time_ns, kFailedRequestAddress + i,
                            e.nbytes, e.nbytes, 0, 0, e.context});
      ++out.failed_requests;
    }
    if (e.action == TraceAction::FreeRequested) continue;  // the free counts at free_completed
    if (e.action == TraceAction::FreeCompleted) e.action = TraceAction::FreeRequested;
    if (is_segment_action(e.action)) {
      out.recorded_segments.push_back(e);
      reserved += reserved_change(recorded[i]);
      out.recorded_peak_reserved = std::max(out.recorded_peak_reserved, reserved_size(reserved));
    }
    out.events.push_back(e);
  }
  if (out.capacity == 0 && retries > 0 && out.config.policy == "caching") {
    // The device ran out where each release was followed by a segment allocation that did not fit
    // under the peak: a device of the peak's size runs out at the same requests.
    out.capacity = whole_peak;
    out.notes.push_back(fmt::format(
        "the device's capacity is not recorded: taken as the peak reserved, {} bytes ({} "
        "release{} of the cache before a segment allocation above it show{} where the device "
        "ran out)",
        whole_peak, retries, retries == 1 ? "" : "s", retries == 1 ? "s" : ""));
  }
  out.contexts = contexts.take();
  return out;
}

// The bytes of the file at `path`, in one buffer of its size (a stream copied through a
// std::ostringstream would hold the file up to three times over while growing and copying).
std::string read_snapshot_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw IoError(fmt::format("cannot read snapshot '{}'", path), path, errno);
  std::string bytes;
  std::error_code error;
  if (const uintmax_t size = std::filesystem::file_size(path, error); !error) bytes.reserve(size);
  // Read in pieces until the end, so a file that is not a regular one (a pipe) reads too.
  char piece[1 << 16];
  while (file.read(piece, sizeof piece) || file.gcount() > 0) {
    bytes.append(piece, static_cast<size_t>(file.gcount()));
  }
  if (file.bad()) throw IoError(fmt::format("cannot read snapshot '{}'", path), path);
  return bytes;
}

bool is_pickle(std::string_view bytes) {
  return !bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x80;  // PROTO
}

PyValue snapshot_from_json(std::string_view bytes, const std::string& path) {
  const nlohmann::json doc = nlohmann::json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    throw TraceError(fmt::format("{}: neither a pickle nor JSON", path), "", "", path);
  }
  try {
    return PyValue::from_json(doc);
  } catch (const PyValueError& e) {
    throw TraceError(fmt::format("{}: {}", path, e.what()), "", "", path);
  }
}

}  // namespace

ImportedSnapshot import_snapshot(const PyValue& snapshot, std::optional<int> device) {
  return import_tree(snapshot, device, nullptr);
}

ImportedSnapshot import_snapshot_pickle(std::string bytes, std::optional<int> device) {
  {
    TraceSink sink;
    const std::optional<PyValue> snapshot = read_pickle(bytes, sink);
    if (snapshot) {
      std::string().swap(bytes);  // released before the requests are built
      return import_tree(*snapshot, device, &sink);
    }
  }
  // The trace lists were not where Python and libtorch put them (the reader can tell only at
  // the end): read the pickle whole.
  const PyValue snapshot = read_pickle(bytes);
  std::string().swap(bytes);
  return import_snapshot(snapshot, device);
}

std::optional<SegmentDivergence> compare_segments(const std::vector<TraceEvent>& recorded,
                                                  const std::vector<TraceEvent>& replayed) {
  std::vector<const TraceEvent*> a, b;
  for (const TraceEvent& e : recorded) {
    if (is_segment_action(e.action)) a.push_back(&e);
  }
  for (const TraceEvent& e : replayed) {
    if (is_segment_action(e.action)) b.push_back(&e);
  }
  // Within a run of consecutive releases (one empty_cache() or one retry's release), the order
  // follows the segments' addresses, which differ between a device and the replay's simulated
  // one: each run is compared in order of action and size.
  const auto releases = [](const TraceEvent* e) {
    return e->action == TraceAction::SegmentFree || e->action == TraceAction::SegmentUnmap;
  };
  for (std::vector<const TraceEvent*>* v : {&a, &b}) {
    for (auto first = v->begin(); first != v->end();) {
      if (!releases(*first)) {
        ++first;
        continue;
      }
      auto last = std::find_if_not(first, v->end(), releases);
      std::stable_sort(first, last, [](const TraceEvent* x, const TraceEvent* y) {
        return std::pair(x->action, x->nbytes) < std::pair(y->action, y->nbytes);
      });
      first = last;
    }
  }
  auto text = [](const std::vector<const TraceEvent*>& v, size_t i) -> std::string {
    if (i >= v.size()) return "(none)";
    return fmt::format("{} {}", trace_action_name(v[i]->action), v[i]->nbytes);
  };
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const bool same = i < a.size() && i < b.size() && a[i]->action == b[i]->action &&
                      a[i]->nbytes == b[i]->nbytes;
    if (same) continue;
    SegmentDivergence d{i, text(a, i), text(b, i), {}};
    for (size_t j = i >= 3 ? i - 3 : 0; j <= i + 2 && j < n; ++j) {
      d.context.push_back(fmt::format("  #{:<6} recorded {:<28} replayed {}{}", j, text(a, j),
                                      text(b, j), j == i ? "   <- first difference" : ""));
    }
    return d;
  }
  return std::nullopt;
}

bool is_snapshot_bytes(std::string_view bytes) {
  if (!bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x80) return true;  // PROTO
  // JSON: memgrad's traces start with "capacity" and "contexts" (keys in sorted order), then
  // "memgrad_events"; a snapshot has PyTorch's keys instead, which memgrad writes sorted too
  // ("allocator_settings", "device_traces", ... "segments") and PyTorch in its own order.
  const auto has = [&](std::string_view key) { return bytes.find(key) != std::string_view::npos; };
  if (has("\"memgrad_events\"") || has("\"contexts\"")) return false;
  return has("\"segments\"") || has("\"device_traces\"") || has("\"allocator_settings\"");
}

PyValue read_snapshot_file(const std::string& path) {
  const std::string bytes = read_snapshot_bytes(path);
  if (is_pickle(bytes)) return read_pickle(bytes);
  return snapshot_from_json(bytes, path);
}

ImportedSnapshot import_snapshot_file(const std::string& path, std::optional<int> device) {
  std::string bytes = read_snapshot_bytes(path);
  if (is_pickle(bytes)) return import_snapshot_pickle(std::move(bytes), device);
  return import_snapshot(snapshot_from_json(bytes, path), device);
}

}  // namespace memgrad
