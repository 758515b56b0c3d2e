// Writing PyTorch's memory snapshot from a memgrad allocator, and snapshot files in and out.
#include "allocator/memory_snapshot.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "allocator/atomic_file.h"
#include "allocator/error.h"
#include "allocator/pickle.h"

namespace memgrad {
namespace {

using Entries = PyValue::Entries;
using Items = PyValue::Items;

// "phase: forward, op: matmul, label: layer 3" (empty parts left out).
std::string metadata_of(const TraceContextRecord& c) {
  std::string out;
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"phase", &c.phase},
                                   {"op", &c.op},
                                   {"label", &c.label}}) {
    if (value->empty()) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("{}: {}", key, *value);
  }
  return out;
}

// One synthetic frame per context: what the viewer shows when a block is hovered. Frames are
// shared values, so each distinct context is one object in the pickle (its memo).
PyValue frames_of(const TraceContextRecord& c) {
  std::string name = c.phase.empty() ? "(no phase)" : c.phase;
  if (!c.label.empty()) name += " / " + c.label;
  const PyValue frame = PyValue::dict({{"filename", c.op.empty() ? "memgrad" : c.op},
                                       {"line", 0},
                                       {"name", name}});
  return PyValue::list({frame});
}

const char* state_of(const BlockSnapshot& b) {
  if (b.pending_free) return "active_pending_free";
  return b.allocated ? "active_allocated" : "inactive";
}

// The trace as PyTorch's TraceEntry dicts. Alloc and free events carry the requested bytes;
// a free that does not record them (the pinned policy's free_completed) takes its alloc's.
Items trace_entries(const std::vector<TraceEvent>& events, const std::vector<PyValue>& frames,
                    const std::vector<PyValue>& metadata) {
  Items out;
  out.reserve(events.size());
  std::unordered_map<uint64_t, uint64_t> requested_at;  // live allocs: address -> bytes
  for (const TraceEvent& e : events) {
    if (e.action == TraceAction::EmptyCache) continue;  // PyTorch has no such entry
    const PyValue& f = frames[e.context];
    const PyValue& m = metadata[e.context];
    const PyValue stream = static_cast<int64_t>(e.stream);
    const PyValue time_us = e.time_ns / 1000;
    const std::string action(trace_action_name(e.action));
    if (e.action == TraceAction::Snapshot) {
      // As PyTorch writes it: address 0, the active bytes, no frames (it records none).
      out.push_back(PyValue::dict({{"action", action}, {"addr", 0}, {"size", e.nbytes},
                                   {"stream", stream}, {"time_us", time_us},
                                   {"compile_context", ""}, {"user_metadata", ""}}));
      continue;
    }
    if (e.action == TraceAction::Oom) {
      out.push_back(PyValue::dict({{"action", action}, {"device_free", e.address},
                                   {"size", e.nbytes}, {"stream", stream}, {"time_us", time_us},
                                   {"compile_context", ""}, {"user_metadata", m},
                                   {"frames", f}}));
      continue;
    }
    uint64_t size = e.nbytes;
    if (e.action == TraceAction::Alloc) {
      size = e.requested;
      requested_at[e.address] = e.requested;
    } else if (e.action == TraceAction::FreeRequested || e.action == TraceAction::FreeCompleted) {
      const auto it = requested_at.find(e.address);
      size = e.requested != 0 || it == requested_at.end() ? e.requested : it->second;
      if (e.action == TraceAction::FreeCompleted && it != requested_at.end()) {
        requested_at.erase(it);
      }
    }
    out.push_back(PyValue::dict({{"action", action}, {"addr", e.address}, {"size", size},
                                 {"stream", stream}, {"time_us", time_us},
                                 {"compile_context", ""}, {"user_metadata", m},
                                 {"frames", f}}));
  }
  return out;
}

// The frames of the alloc event of each block still live at the end of the trace.
std::unordered_map<uint64_t, uint32_t> live_contexts(const std::vector<TraceEvent>& events) {
  std::unordered_map<uint64_t, uint32_t> live;
  for (const TraceEvent& e : events) {
    if (e.action == TraceAction::Alloc) live[e.address] = e.context;
    if (e.action == TraceAction::FreeCompleted) live.erase(e.address);
  }
  return live;
}

PyValue segment_value(const SegmentSnapshot& s, int device,
                      const std::unordered_map<uint64_t, uint32_t>& live,
                      const std::vector<PyValue>& frames) {
  Items blocks;
  uint64_t allocated = 0, active = 0, requested = 0;
  for (const BlockSnapshot& b : s.blocks) {
    if (b.nbytes == 0) continue;
    Entries block = {{"address", b.address}, {"size", b.nbytes},
                     {"requested_size", b.allocated || b.pending_free ? b.requested : 0},
                     {"state", state_of(b)}};
    if (b.allocated || b.pending_free) {
      active += b.nbytes;
      requested += b.requested;
      if (b.allocated) allocated += b.nbytes;
      const auto it = live.find(b.address);
      block.emplace_back("frames", it != live.end() ? frames[it->second] : PyValue::list());
    }
    blocks.push_back(PyValue::dict(std::move(block)));
  }
  return PyValue::dict({{"device", device},
                        {"address", s.address},
                        {"total_size", s.nbytes},
                        {"allocated_size", allocated},
                        {"active_size", active},
                        {"requested_size", requested},
                        {"stream", static_cast<int64_t>(s.stream)},
                        {"segment_type", s.small_pool ? "small" : "large"},
                        {"segment_pool_id", PyValue::tuple({0, 0})},
                        {"is_expandable", s.expandable},
                        {"frames", PyValue::list()},
                        {"blocks", PyValue::list(std::move(blocks))}});
}

// The bytes of the file at `path`, in one buffer of its size (a stream copied through a
// std::ostringstream would hold the file up to three times over while growing and copying).
std::string read_snapshot_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw IoError(fmt::format("cannot read snapshot '{}'", path), path);
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
    throw TraceError(fmt::format("{}: neither a pickle nor JSON", path));
  }
  try {
    return PyValue::from_json(doc);
  } catch (const PyValueError& e) {
    throw TraceError(fmt::format("{}: {}", path, e.what()));
  }
}

// ---- allocator_settings read back ----

// A setting's value as Python prints it, for notes: True, 64, 0.5, 'text', or its type.
std::string setting_text(const PyValue& v) {
  switch (v.kind()) {
    case PyValue::Kind::Bool: return v.as_bool() ? "True" : "False";
    case PyValue::Kind::Int: return std::to_string(v.as_int());
    case PyValue::Kind::Float: return fmt::format("{}", v.as_float());
    case PyValue::Kind::Str: return fmt::format("'{}'", v.as_str());
    default: return fmt::format("a {}", v.kind_name());
  }
}

// PyTorch's settings that change nothing memgrad models at their default value, and what they
// configure instead (a value other than the default is named in a note).
struct UnmodelledSetting {
  const char* key;
  const char* what;
};
constexpr UnmodelledSetting kUnmodelled[] = {
    {"release_lock_on_cudamalloc", "locking around cudaMalloc"},
    {"pinned_use_cuda_host_register", "pinned host memory"},
    {"pinned_num_register_threads", "pinned host memory"},
    {"graph_capture_record_stream_reuse", "CUDA graph capture"},
};

// Whether `v` is the default of the unmodelled setting `key`: False, or 1 register thread.
bool is_default_of(std::string_view key, const PyValue& v) {
  if (key == "pinned_num_register_threads") {
    return v.kind() == PyValue::Kind::Int && v.as_int() == 1;
  }
  return v.kind() == PyValue::Kind::Bool && !v.as_bool();
}

// The "key:value" entries of a PYTORCH_CUDA_ALLOC_CONF text, split at the commas outside
// brackets (roundup_power2_divisions:[256:1,>:4] is one entry).
std::vector<std::pair<std::string, std::string>> conf_entries(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] == '[') ++depth;
    if (i < text.size() && text[i] == ']') --depth;
    if (i < text.size() && (text[i] != ',' || depth > 0)) continue;
    std::string entry(text.substr(start, i - start));
    std::erase(entry, ' ');
    start = i + 1;
    if (entry.empty()) continue;
    const size_t colon = entry.find(':');
    if (colon == std::string::npos) {
      out.emplace_back(entry, "");
    } else {
      out.emplace_back(entry.substr(0, colon), entry.substr(colon + 1));
    }
  }
  return out;
}

// The PYTORCH_CUDA_ALLOC_CONF text of a PyTorch snapshot: the one setting only it carries
// (max_non_split_rounding_mb) applied to `config`; the backend, and keys none of PyTorch's
// structured settings carry, in `ignored` (or `notes`, for cudaMallocAsync).
void read_conf_text(std::string_view text, AllocatorConfig& config,
                    std::vector<std::string>& ignored, std::vector<std::string>& notes) {
  // Carried by the structured settings too, which are read instead.
  static const std::set<std::string, std::less<>> kStructured = {
      "max_split_size_mb", "garbage_collection_threshold", "expandable_segments",
      "roundup_power2_divisions", "release_lock_on_cudamalloc", "pinned_use_cuda_host_register",
      "pinned_num_register_threads", "graph_capture_record_stream_reuse"};
  for (const auto& [key, value] : conf_entries(text)) {
    if (kStructured.contains(key)) continue;
    if (key == "backend") {
      if (value == "native") continue;
      notes.push_back(fmt::format(
          "PYTORCH_CUDA_ALLOC_CONF backend:{}: the run was served by {}, not by PyTorch's caching "
          "allocator; replayed with memgrad's caching policy all the same (--validate compares "
          "it with decisions the caching rules did not make)",
          value, value == "cudaMallocAsync" ? "CUDA's stream-ordered allocator" : "that backend"));
      continue;
    }
    if (key == "max_non_split_rounding_mb") {
      size_t mb = 0;
      const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), mb);
      if (error == std::errc() && end == value.data() + value.size() && mb <= (SIZE_MAX >> 20)) {
        config.max_non_split_rounding_size = mb * kMiB;
        continue;
      }
    }
    ignored.push_back(fmt::format("PYTORCH_CUDA_ALLOC_CONF {}:{}", key, value));
  }
}

}  // namespace

PyValue allocator_settings_of(const AllocatorConfig& config) {
  Entries divisions;
  for (size_t i = 0; i < kRoundupIntervals; ++i) {
    divisions.emplace_back(std::to_string(size_t{1} << i),
                           static_cast<int64_t>(config.roundup_power2_divisions[i]));
  }
  const int64_t max_split =
      config.max_split_size == SIZE_MAX ? -1 : static_cast<int64_t>(config.max_split_size);
  return PyValue::dict({
      {"PYTORCH_CUDA_ALLOC_CONF", config.to_string()},
      {"max_split_size", max_split},
      {"garbage_collection_threshold", config.garbage_collection_threshold},
      {"expandable_segments", config.policy == "expandable" || config.policy == "stitch"},
      {"roundup_power2_divisions", PyValue::dict(std::move(divisions))},
      {"release_lock_on_cudamalloc", false},
      {"pinned_use_cuda_host_register", false},
      {"pinned_num_register_threads", 1},
      {"max_non_split_rounding_size", config.max_non_split_rounding_size},
      {"per_process_memory_fraction", config.memory_fraction},
      {"memgrad_policy", config.policy},
  });
}

void read_allocator_settings(const PyValue* settings, AllocatorConfig& c,
                             std::vector<std::string>& notes) {
  if (settings == nullptr || settings->kind() != PyValue::Kind::Dict) {
    notes.push_back("no allocator_settings: replayed with the caching policy's defaults");
    return;
  }
  const bool memgrads = settings->find("memgrad_policy") != nullptr;
  std::vector<std::string> ignored;  // settings the replay leaves out, as "key=value (why)"
  const auto is_number = [](const PyValue& v) {
    return v.kind() == PyValue::Kind::Float || v.kind() == PyValue::Kind::Int;
  };
  const auto number = [](const PyValue& v) {
    return v.kind() == PyValue::Kind::Int ? static_cast<double>(v.as_int()) : v.as_float();
  };
  for (const auto& [key_value, v] : settings->entries()) {
    if (key_value.kind() != PyValue::Kind::Str) continue;
    const std::string& key = key_value.as_str();
    const std::string where = "allocator_settings." + key;
    // A setting memgrad models, written with another type: named, and left at its default.
    const auto mistyped = [&](const char* expected) {
      ignored.push_back(fmt::format("{}={} (expected {})", key, setting_text(v), expected));
    };
    if (key == "memgrad_policy") {
      if (v.kind() != PyValue::Kind::Str) {
        mistyped("a str");
      } else {
        c.policy = v.as_str();
      }
    } else if (key == "max_split_size") {
      if (v.kind() != PyValue::Kind::Int) {
        mistyped("an int");
      } else {
        c.max_split_size = v.as_int() < 0 ? SIZE_MAX : static_cast<size_t>(v.as_int());
      }
    } else if (key == "garbage_collection_threshold") {
      if (!is_number(v)) {
        mistyped("a float");
      } else {
        c.garbage_collection_threshold = number(v);
      }
    } else if (key == "per_process_memory_fraction") {
      if (!is_number(v)) {
        mistyped("a float");
      } else {
        c.memory_fraction = number(v);
      }
    } else if (key == "max_non_split_rounding_size") {
      if (v.kind() != PyValue::Kind::Int) {
        mistyped("an int");
      } else if (v.as_int() < 0) {
        throw TraceError(fmt::format("{}: {} bytes, expected an int >= 0", where, v.as_int()));
      } else {
        c.max_non_split_rounding_size = static_cast<size_t>(v.as_int());
      }
    } else if (key == "roundup_power2_divisions") {
      if (v.kind() != PyValue::Kind::Dict) {
        mistyped("a dict");
        continue;
      }
      for (const auto& [interval, n] : v.entries()) {
        const std::string mb = interval.kind() == PyValue::Kind::Str ? interval.as_str() : "";
        size_t bucket = 0;
        while (bucket < kRoundupIntervals && std::to_string(size_t{1} << bucket) != mb) ++bucket;
        if (bucket == kRoundupIntervals || n.kind() != PyValue::Kind::Int || n.as_int() < 0) {
          notes.push_back(fmt::format("{}: interval '{}' is not one memgrad models "
                                      "(powers of two from 1 to 32768 MB): ignored",
                                      where, mb));
          continue;
        }
        c.roundup_power2_divisions[bucket] = static_cast<size_t>(n.as_int());
      }
    } else if (key == "expandable_segments") {
      if (v.kind() != PyValue::Kind::Bool) {
        mistyped("a bool");
      } else if (v.as_bool() && !memgrads) {
        c.policy = "expandable";
        notes.push_back("expandable_segments: replayed with memgrad's expandable policy, "
                        "whose page mapping differs from PyTorch's: segment_map sizes may "
                        "diverge");
      }
    } else if (key == "trace_alloc_overflowed") {
      if (v.kind() == PyValue::Kind::Bool && v.as_bool()) {
        notes.push_back("the trace's ring buffer overflowed: allocations older than its first "
                        "event are taken from the final segments, as live at time zero");
      }
    } else if (key == "trace_alloc_max_entries") {
      // The ring's size: what trace_alloc_overflowed is about; nothing to replay.
    } else if (key == "PYTORCH_CUDA_ALLOC_CONF") {
      // memgrad writes its own configuration there, whose every key the other settings carry.
      if (v.kind() == PyValue::Kind::Str && !memgrads) {
        read_conf_text(v.as_str(), c, ignored, notes);
      }
    } else if (const auto* u = std::find_if(std::begin(kUnmodelled), std::end(kUnmodelled),
                                            [&](const UnmodelledSetting& s) {
                                              return key == s.key;
                                            });
               u != std::end(kUnmodelled)) {
      if (!is_default_of(key, v)) {
        ignored.push_back(fmt::format("{}={} ({})", key, setting_text(v), u->what));
      }
    } else {
      ignored.push_back(fmt::format("{}={} (unknown to memgrad)", key, setting_text(v)));
    }
  }
  if (!ignored.empty()) {
    std::string list;
    for (const std::string& s : ignored) list += (list.empty() ? "" : ", ") + s;
    notes.push_back(fmt::format("allocator settings memgrad does not model, ignored (the replay "
                                "runs as if they were unset): {}",
                                list));
  }
  if (c.policy != "caching" && !memgrads) return;
  try {
    c.validate();
  } catch (const ConfigError& e) {
    throw TraceError(fmt::format("allocator_settings: {}", e.what()));
  }
}

PyValue memory_snapshot(PolicyAllocator& allocator, const AllocatorConfig& config,
                        int device_index) {
  // The segments first, then the snapshot entry, then the trace that ends with it: the order of
  // PyTorch's snapshot(), whose entry records the active bytes of the segments it returns.
  const std::vector<SegmentSnapshot> state = allocator.snapshot();
  uint64_t active = 0;
  for (const SegmentSnapshot& s : state) {
    for (const BlockSnapshot& b : s.blocks) {
      if (b.allocated || b.pending_free) active += b.nbytes;
    }
  }
  allocator.mark_in_trace(TraceAction::Snapshot, active);
  const TraceRecorder& trace = allocator.trace();
  const std::vector<TraceEvent> events = trace.events();
  const std::vector<TraceContextRecord> contexts = trace.contexts();
  std::vector<PyValue> frames, metadata;
  for (const TraceContextRecord& c : contexts) {
    frames.push_back(frames_of(c));
    metadata.push_back(metadata_of(c));
  }
  const auto live = live_contexts(events);
  Items segments;
  for (const SegmentSnapshot& s : state) {
    segments.push_back(segment_value(s, device_index, live, frames));
  }
  Items traces(static_cast<size_t>(device_index), PyValue::list());
  traces.push_back(PyValue::list(trace_entries(events, frames, metadata)));
  Entries settings = allocator_settings_of(config).entries();
  settings.emplace_back("trace_alloc_max_entries",
                        trace.max_entries() == SIZE_MAX ? int64_t{-1}
                                                        : static_cast<int64_t>(trace.max_entries()));
  settings.emplace_back("trace_alloc_overflowed", trace.overflowed());
  const MemorySource& source = allocator.source();
  return PyValue::dict({
      {"segments", PyValue::list(std::move(segments))},
      {"device_traces", PyValue::list(std::move(traces))},
      {"allocator_settings", PyValue::dict(std::move(settings))},
      {"memgrad", PyValue::dict({{"device", source.name()},
                                 {"policy", std::string(allocator.policy_name())},
                                 {"capacity", source.capacity()}})},
  });
}

void write_snapshot_file(const std::string& path, const PyValue& snapshot) {
  const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  write_file_atomically(path, json ? snapshot.to_json().dump() : write_pickle(snapshot, 2));
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
