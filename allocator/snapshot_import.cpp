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
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "allocator/error.h"
#include "allocator/memory_snapshot.h"

namespace memgrad {
namespace {

// Every address and size of a snapshot must be an int in [0, 2^62]: far from overflow in the
// sums below, and above any device's memory.
constexpr int64_t kMaxField = int64_t{1} << 62;
// Where the requests that ran out of memory are placed: above every address a snapshot holds.
constexpr uint64_t kFailedRequestAddress = uint64_t{1} << 63;

// Reads dict[key] as an int in [0, kMaxField]; TraceError naming `where`, the key and the value.
uint64_t field(const PyValue& dict, std::string_view key, const std::string& where) {
  const PyValue* v = dict.find(key);
  if (v == nullptr) throw TraceError(fmt::format("{}: no \"{}\"", where, key));
  if (v->kind() != PyValue::Kind::Int) {
    throw TraceError(fmt::format("{}: \"{}\" is a {}, expected an int", where, key,
                                 v->kind_name()));
  }
  const int64_t n = v->as_int();
  if (n < 0 || n > kMaxField) {
    throw TraceError(fmt::format("{}: \"{}\" is {}, expected an int in [0, 2^62]", where, key, n));
  }
  return static_cast<uint64_t>(n);
}

// A stream id: PyTorch writes the cudaStream_t value (a pointer, or 0 for the default stream).
StreamId stream_of(const PyValue& dict, const std::string& where) {
  const PyValue* v = dict.find("stream");
  if (v == nullptr || v->is_none()) return kDefaultStream;
  if (v->kind() != PyValue::Kind::Int) {
    throw TraceError(fmt::format("{}: \"stream\" is a {}, expected an int", where, v->kind_name()));
  }
  return static_cast<StreamId>(v->as_int());
}

const PyValue::Items& list_at(const PyValue& dict, std::string_view key, const std::string& where) {
  const PyValue* v = dict.find(key);
  if (v == nullptr) throw TraceError(fmt::format("{}: no \"{}\"", where, key));
  if (v->kind() != PyValue::Kind::List && v->kind() != PyValue::Kind::Tuple) {
    throw TraceError(fmt::format("{}: \"{}\" is a {}, expected a list", where, key,
                                 v->kind_name()));
  }
  return v->items();
}

const PyValue& dict_item(const PyValue& v, const std::string& where) {
  if (v.kind() != PyValue::Kind::Dict) {
    throw TraceError(fmt::format("{}: a {}, expected a dict", where, v.kind_name()));
  }
  return v;
}

// The context of an event: memgrad writes one synthetic frame (op, phase / label); PyTorch's
// frames are a stack, whose first entry (the innermost call) stands for it here.
TraceContextRecord context_of(const PyValue& e) {
  const PyValue* frames = e.find("frames");
  if (frames == nullptr || (frames->kind() != PyValue::Kind::List &&
                            frames->kind() != PyValue::Kind::Tuple) || frames->items().empty()) {
    return {};
  }
  const PyValue& f = frames->items().front();
  if (f.kind() != PyValue::Kind::Dict) return {};
  const PyValue* file = f.find("filename");
  const PyValue* name = f.find("name");
  TraceContextRecord c;
  if (file != nullptr && file->kind() == PyValue::Kind::Str) c.op = file->as_str();
  if (name != nullptr && name->kind() == PyValue::Kind::Str) c.phase = name->as_str();
  return c;
}

class ContextTable {
 public:
  uint32_t intern(TraceContextRecord c) {
    const auto key = std::make_tuple(c.phase, c.op, c.label);
    const auto it = index_.find(key);
    if (it != index_.end()) return it->second;
    records_.push_back(std::move(c));
    return index_[key] = static_cast<uint32_t>(records_.size() - 1);
  }
  std::vector<TraceContextRecord> take() { return std::move(records_); }

 private:
  std::map<std::tuple<std::string, std::string, std::string>, uint32_t> index_;
  std::vector<TraceContextRecord> records_;
};

// ---- allocator_settings -> the replay's config ----

void read_settings(const PyValue* settings, ImportedSnapshot& out) {
  AllocatorConfig& c = out.config;
  if (settings == nullptr || settings->kind() != PyValue::Kind::Dict) {
    out.notes.push_back("no allocator_settings: replayed with the caching policy's defaults");
    return;
  }
  for (const auto& [key_value, v] : settings->entries()) {
    if (key_value.kind() != PyValue::Kind::Str) continue;
    const std::string& key = key_value.as_str();
    const std::string where = "allocator_settings." + key;
    if (key == "memgrad_policy" && v.kind() == PyValue::Kind::Str) {
      c.policy = v.as_str();
    } else if (key == "max_split_size" && v.kind() == PyValue::Kind::Int) {
      c.max_split_size = v.as_int() < 0 ? SIZE_MAX : static_cast<size_t>(v.as_int());
    } else if (key == "garbage_collection_threshold" && v.kind() == PyValue::Kind::Float) {
      c.garbage_collection_threshold = v.as_float();
    } else if (key == "per_process_memory_fraction" && v.kind() == PyValue::Kind::Float) {
      c.memory_fraction = v.as_float();
    } else if (key == "max_non_split_rounding_size" && v.kind() == PyValue::Kind::Int) {
      c.max_non_split_rounding_size = field(*settings, key, "allocator_settings");
    } else if (key == "roundup_power2_divisions" && v.kind() == PyValue::Kind::Dict) {
      for (const auto& [interval, n] : v.entries()) {
        const std::string mb = interval.kind() == PyValue::Kind::Str ? interval.as_str() : "";
        size_t bucket = 0;
        while (bucket < kRoundupIntervals && std::to_string(size_t{1} << bucket) != mb) ++bucket;
        if (bucket == kRoundupIntervals || n.kind() != PyValue::Kind::Int || n.as_int() < 0) {
          out.notes.push_back(fmt::format("{}: interval '{}' is not one memgrad models "
                                          "(powers of two from 1 to 32768 MB): ignored",
                                          where, mb));
          continue;
        }
        c.roundup_power2_divisions[bucket] = static_cast<size_t>(n.as_int());
      }
    } else if (key == "expandable_segments" && v.kind() == PyValue::Kind::Bool && v.as_bool()) {
      if (settings->find("memgrad_policy") == nullptr) {
        c.policy = "expandable";
        out.notes.push_back("expandable_segments: replayed with memgrad's expandable policy, "
                            "whose page mapping differs from PyTorch's: segment_map sizes may "
                            "diverge");
      }
    } else if (key == "trace_alloc_overflowed" && v.kind() == PyValue::Kind::Bool && v.as_bool()) {
      out.notes.push_back("the trace's ring buffer overflowed: allocations older than its first "
                          "event are taken from the final segments, as live at time zero");
    }
  }
  if (c.policy != "caching" && settings->find("memgrad_policy") == nullptr) return;
  try {
    c.validate();
  } catch (const ConfigError& e) {
    throw TraceError(fmt::format("allocator_settings: {}", e.what()));
  }
}

// ---- the trace -> requests ----

int choose_device(const PyValue::Items& traces, std::optional<int> device,
                  std::vector<std::string>& notes) {
  if (device) {
    if (*device < 0 || static_cast<size_t>(*device) >= traces.size()) {
      throw TraceError(fmt::format("device_traces: no device {} (the snapshot has {})", *device,
                                   traces.size()));
    }
    return *device;
  }
  int best = 0;
  size_t with_events = 0;
  for (size_t d = 0; d < traces.size(); ++d) {
    const size_t n = traces[d].kind() == PyValue::Kind::List ? traces[d].items().size() : 0;
    with_events += n > 0 ? 1 : 0;
    if (n > traces[static_cast<size_t>(best)].items().size()) best = static_cast<int>(d);
  }
  if (with_events > 1) {
    notes.push_back(fmt::format("{} devices have events: device {} (the most) is replayed; "
                                "choose another with --device",
                                with_events, best));
  }
  return best;
}

struct LiveBlock {
  uint64_t size = 0;
  StreamId stream = kDefaultStream;
};

// The blocks active at the end on `device` (address -> requested bytes) and notes on pools.
std::map<uint64_t, LiveBlock> final_live_blocks(const PyValue::Items& segments, int device,
                                                ImportedSnapshot& out) {
  std::map<uint64_t, LiveBlock> live;
  size_t private_pools = 0;
  for (size_t s = 0; s < segments.size(); ++s) {
    const std::string where = fmt::format("segments[{}]", s);
    const PyValue& seg = dict_item(segments[s], where);
    if (static_cast<int>(field(seg, "device", where)) != device) continue;
    uint64_t address = field(seg, "address", where);
    const uint64_t total = field(seg, "total_size", where);
    out.recorded_peak_reserved += total;  // reserved at the end, for now
    const PyValue* pool = seg.find("segment_pool_id");
    if (pool != nullptr && (pool->kind() == PyValue::Kind::Tuple ||
                            pool->kind() == PyValue::Kind::List)) {
      for (const PyValue& id : pool->items()) {
        if (id.kind() == PyValue::Kind::Int && id.as_int() != 0) {
          ++private_pools;
          break;
        }
      }
    }
    const StreamId stream = stream_of(seg, where);
    const PyValue::Items& blocks = list_at(seg, "blocks", where);
    for (size_t b = 0; b < blocks.size(); ++b) {
      const std::string bwhere = fmt::format("{}.blocks[{}]", where, b);
      const PyValue& block = dict_item(blocks[b], bwhere);
      const uint64_t size = field(block, "size", bwhere);
      const PyValue* state = block.find("state");
      const bool active = state != nullptr && state->kind() == PyValue::Kind::Str &&
                          state->as_str() != "inactive";
      if (active) {
        const uint64_t requested =
            block.find("requested_size") != nullptr ? field(block, "requested_size", bwhere) : size;
        live[address] = {requested, stream};
      }
      address += size;
    }
    if (address - field(seg, "address", where) != total) {
      throw TraceError(fmt::format("{}: block sizes sum to {}, total_size is {}", where,
                                   address - field(seg, "address", where), total));
    }
  }
  if (private_pools > 0) {
    out.notes.push_back(fmt::format("{} segments belong to private pools (CUDA graphs, MemPool): "
                                    "their requests are replayed in the default pool",
                                    private_pools));
  }
  return live;
}

std::optional<TraceAction> action_of(const std::string& name) {
  for (TraceAction a : {TraceAction::Alloc, TraceAction::FreeRequested, TraceAction::FreeCompleted,
                        TraceAction::SegmentAlloc, TraceAction::SegmentFree,
                        TraceAction::SegmentMap, TraceAction::SegmentUnmap, TraceAction::Oom}) {
    if (trace_action_name(a) == name) return a;
  }
  return std::nullopt;
}

bool is_segment_action(TraceAction a) {
  return a == TraceAction::SegmentAlloc || a == TraceAction::SegmentFree ||
         a == TraceAction::SegmentMap || a == TraceAction::SegmentUnmap;
}

// The recorded events of one device, as TraceEvents (free_completed kept as FreeCompleted for
// now), with oom's device_free in `address` as memgrad records it.
std::vector<TraceEvent> read_events(const PyValue::Items& trace, int device, ContextTable& contexts,
                                    ImportedSnapshot& out) {
  std::vector<TraceEvent> events;
  events.reserve(trace.size());
  size_t skipped = 0;
  std::set<StreamId> streams;
  for (size_t i = 0; i < trace.size(); ++i) {
    const std::string where = fmt::format("device_traces[{}][{}]", device, i);
    const PyValue& e = dict_item(trace[i], where);
    const PyValue* name = e.find("action");
    if (name == nullptr || name->kind() != PyValue::Kind::Str) {
      throw TraceError(fmt::format("{}: no \"action\" string", where));
    }
    const std::optional<TraceAction> action = action_of(name->as_str());
    if (!action) {
      if (name->as_str() == "snapshot" || name->as_str() == "user_defined") {
        ++skipped;
        continue;
      }
      throw TraceError(fmt::format("{}: unknown action '{}'", where, name->as_str()));
    }
    TraceEvent t;
    t.action = *action;
    t.stream = stream_of(e, where);
    t.address = *action == TraceAction::Oom ? field(e, "device_free", where)
                                            : field(e, "addr", where);
    t.nbytes = field(e, "size", where);
    if (t.action == TraceAction::Alloc && t.nbytes > (uint64_t{1} << 60)) {
      throw TraceError(fmt::format("{}: an allocation of {} bytes (above 1 EiB)", where, t.nbytes));
    }
    t.requested = is_segment_action(t.action) || t.action == TraceAction::Oom ? 0 : t.nbytes;
    const PyValue* time = e.find("time_us");
    if (time != nullptr && time->kind() == PyValue::Kind::Int && time->as_int() >= 0 &&
        time->as_int() < kMaxField / 1000) {
      t.time_ns = time->as_int() * 1000;
    }
    t.context = contexts.intern(context_of(e));
    if (t.action == TraceAction::Alloc) streams.insert(t.stream);
    events.push_back(t);
  }
  if (skipped > 0) {
    out.notes.push_back(fmt::format("{} snapshot/user_defined markers skipped (not requests)",
                                    skipped));
  }
  if (streams.size() > 1) {
    out.notes.push_back(fmt::format("{} streams allocate: each is replayed as its own stream; "
                                    "frees take effect at free_completed (record_stream waits "
                                    "are not modelled)",
                                    streams.size()));
  }
  return events;
}

// The most reserved bytes the segment events reach from `start`.
size_t peak_reserved(const std::vector<TraceEvent>& events, size_t start) {
  int64_t reserved = static_cast<int64_t>(start), peak = reserved;
  for (const TraceEvent& e : events) {
    if (e.action == TraceAction::SegmentAlloc || e.action == TraceAction::SegmentMap) {
      reserved += static_cast<int64_t>(e.nbytes);
    } else if (e.action == TraceAction::SegmentFree || e.action == TraceAction::SegmentUnmap) {
      reserved -= static_cast<int64_t>(e.nbytes);
    }
    peak = std::max(peak, reserved);
  }
  return static_cast<size_t>(std::max<int64_t>(peak, 0));
}

// Whether the run of segment frees (or unmaps) starting at `first` is an empty_cache() call rather than
// the allocator's own release: under a policy that gives a segment back when its block is freed
// (passthrough, and the lab's; never the caching policy), the segment_free follows that block's
// free_completed; a retry after a failed segment
// allocation frees cached segments and then obtains one that would not have fitted
// (`reserved` + its size above `limit`); garbage collection frees and then serves a request
// from the cache (only with a threshold set). Anything else freed cached segments on request.
bool is_empty_cache(const std::vector<TraceEvent>& events, size_t first, size_t reserved,
                    size_t limit, bool garbage_collection, bool caching) {
  if (!caching && first > 0 && events[first - 1].action == TraceAction::FreeCompleted &&
      events[first - 1].address == events[first].address) {
    return false;
  }
  size_t next = first;
  while (next < events.size() && (events[next].action == TraceAction::SegmentFree ||
                                   events[next].action == TraceAction::SegmentUnmap ||
                                   events[next].action == TraceAction::Oom)) {
    ++next;
  }
  if (next == events.size()) return true;
  const TraceEvent& after = events[next];
  if (after.action == TraceAction::SegmentAlloc || after.action == TraceAction::SegmentMap) {
    return reserved + after.nbytes <= limit;
  }
  if (after.action == TraceAction::Alloc) return !garbage_collection;
  return true;
}

}  // namespace

ImportedSnapshot import_snapshot(const PyValue& snapshot, std::optional<int> device) {
  ImportedSnapshot out;
  if (snapshot.kind() != PyValue::Kind::Dict) {
    throw TraceError(fmt::format("snapshot: a {}, expected a dict with \"segments\" and "
                                 "\"device_traces\"",
                                 snapshot.kind_name()));
  }
  const PyValue::Items& segments = list_at(snapshot, "segments", "snapshot");
  const PyValue::Items& traces = list_at(snapshot, "device_traces", "snapshot");
  out.device = choose_device(traces, device, out.notes);
  out.device_name = fmt::format("cuda:{}", out.device);
  if (const PyValue* info = snapshot.find("memgrad"); info && info->kind() == PyValue::Kind::Dict) {
    if (const PyValue* n = info->find("device"); n && n->kind() == PyValue::Kind::Str) {
      out.device_name = n->as_str();
    }
    if (info->find("capacity") != nullptr) out.capacity = field(*info, "capacity", "memgrad");
  }
  read_settings(snapshot.find("allocator_settings"), out);
  std::map<uint64_t, LiveBlock> live_at_end = final_live_blocks(segments, out.device, out);
  if (traces.empty()) throw TraceError("device_traces: empty (no history was recorded)");
  const PyValue& trace_value = traces[static_cast<size_t>(out.device)];
  if (trace_value.kind() != PyValue::Kind::List) {
    throw TraceError(fmt::format("device_traces[{}]: a {}, expected a list", out.device,
                                 trace_value.kind_name()));
  }
  ContextTable contexts;
  const std::vector<TraceEvent> recorded =
      read_events(trace_value.items(), out.device, contexts, out);

  // Blocks from before the history: freed without an alloc, or live at the end without one.
  std::map<uint64_t, LiveBlock> before;  // address -> size, in address order
  std::unordered_map<uint64_t, bool> allocated;
  for (const TraceEvent& e : recorded) {
    if (e.action == TraceAction::Alloc) allocated[e.address] = true;
    if (e.action == TraceAction::FreeCompleted) {
      const auto it = allocated.find(e.address);
      if (it == allocated.end() || !it->second) {
        before[e.address] = {e.nbytes, e.stream};
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
  for (const auto& [address, block] : before) {
    out.events.push_back({TraceAction::Alloc, block.stream, 0, address, block.size, block.size,
                          0, 0, contexts.intern({"before history", "", ""})});
  }

  // The requests, with empty_cache() where a burst of segment frees shows one, and the peak of
  // the reserved bytes the segment events imply (walked back from the end).
  int64_t reserved = static_cast<int64_t>(out.recorded_peak_reserved);
  for (const TraceEvent& e : recorded) {
    if (e.action == TraceAction::SegmentAlloc || e.action == TraceAction::SegmentMap) {
      reserved -= static_cast<int64_t>(e.nbytes);
    } else if (e.action == TraceAction::SegmentFree || e.action == TraceAction::SegmentUnmap) {
      reserved += static_cast<int64_t>(e.nbytes);
    }
  }
  out.recorded_peak_reserved = static_cast<size_t>(std::max<int64_t>(reserved, 0));
  const size_t whole_peak = peak_reserved(recorded, out.recorded_peak_reserved);
  // What the device let the allocator reserve: its capacity x fraction when known, else the
  // most it ever reserved.
  const size_t limit =
      out.capacity > 0
          ? static_cast<size_t>(static_cast<double>(out.capacity) * out.config.memory_fraction)
          : whole_peak;
  for (size_t i = 0; i < recorded.size(); ++i) {
    TraceEvent e = recorded[i];
    const auto releases = [](TraceAction a) {
      return a == TraceAction::SegmentFree || a == TraceAction::SegmentUnmap;
    };
    if (releases(e.action) && (i == 0 || !releases(recorded[i - 1].action)) &&
        is_empty_cache(recorded, i, static_cast<size_t>(std::max<int64_t>(reserved, 0)), limit,
                       out.config.garbage_collection_threshold > 0.0,
                       out.config.policy == "caching")) {
      out.events.push_back({TraceAction::EmptyCache, kDefaultStream, e.time_ns, 0, 0, 0, 0, 0,
                            e.context});
    }
    if (e.action == TraceAction::Oom && !out.recorded_oom) {
      out.recorded_oom = true;
      out.segments_before_oom = out.recorded_segments.size();
    }
    if (e.action == TraceAction::Oom && out.capacity == 0) {
      out.capacity = static_cast<size_t>(std::max<int64_t>(reserved, 0)) + e.address;
      out.notes.push_back(fmt::format("the device's capacity is not recorded: taken as the "
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
      const int64_t n = static_cast<int64_t>(e.nbytes);
      const bool grows = e.action == TraceAction::SegmentAlloc || e.action == TraceAction::SegmentMap;
      reserved += grows ? n : -n;
      out.recorded_peak_reserved = std::max(out.recorded_peak_reserved,
                                            static_cast<size_t>(std::max<int64_t>(reserved, 0)));
    }
    out.events.push_back(e);
  }
  out.contexts = contexts.take();
  return out;
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

}  // namespace memgrad
