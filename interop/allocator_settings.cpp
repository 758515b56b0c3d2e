// allocator_settings, both ways: an AllocatorConfig written as PyTorch's snapshot writes its
// allocator settings, and a snapshot's settings read back into the configuration a replay uses.
#include "interop/allocator_settings.h"

#include <charconv>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "allocator/error.h"
#include "interop/error.h"

namespace memgrad {
namespace {

using Entries = PyValue::Entries;

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
      "max_split_size_mb",           "garbage_collection_threshold",
      "expandable_segments",         "roundup_power2_divisions",
      "release_lock_on_cudamalloc",  "pinned_use_cuda_host_register",
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
        throw TraceError(fmt::format("{}: {} bytes, expected an int >= 0", where, v.as_int()),
                         where);
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
          notes.push_back(
              fmt::format("{}: interval '{}' is not one memgrad models "
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
        notes.push_back(
            "expandable_segments: replayed with memgrad's expandable policy, "
            "whose page mapping differs from PyTorch's: segment_map sizes may "
            "diverge");
      }
    } else if (key == "trace_alloc_overflowed") {
      if (v.kind() == PyValue::Kind::Bool && v.as_bool()) {
        notes.push_back(
            "the trace's ring buffer overflowed: allocations older than its first "
            "event are taken from the final segments, as live at time zero");
      }
    } else if (key == "trace_alloc_max_entries") {
      // The ring's size: what trace_alloc_overflowed is about; nothing to replay.
    } else if (key == "PYTORCH_CUDA_ALLOC_CONF") {
      // memgrad writes its own configuration there, whose every key the other settings carry.
      if (v.kind() == PyValue::Kind::Str && !memgrads) {
        read_conf_text(v.as_str(), c, ignored, notes);
      }
    } else if (const auto* u =
                   std::find_if(std::begin(kUnmodelled), std::end(kUnmodelled),
                                [&](const UnmodelledSetting& s) { return key == s.key; });
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
    notes.push_back(
        fmt::format("allocator settings memgrad does not model, ignored (the replay "
                    "runs as if they were unset): {}",
                    list));
  }
  if (c.policy != "caching" && !memgrads) {
    // The replay applies the fraction whichever policy runs: 1e300, NaN or -1 would become a
    // size unchecked.
    if (!(c.memory_fraction > 0.0 && c.memory_fraction <= 1.0)) {
      throw TraceError(fmt::format("allocator_settings: per_process_memory_fraction {} must be in "
                                   "(0, 1]",
                                   c.memory_fraction),
                       "allocator_settings", "per_process_memory_fraction");
    }
    return;
  }
  try {
    c.validate();
  } catch (const ConfigError& e) {
    throw TraceError(fmt::format("allocator_settings: {}", e.what()), "allocator_settings", e.key);
  }
}

}  // namespace memgrad
