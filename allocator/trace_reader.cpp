// Reading a memgrad trace: a streaming (SAX) parse of TraceRecorder::to_json's text.
//
// A trace of 10^6 events is a few hundred MB of JSON, most of it the Perfetto copy
// ("traceEvents") that the lab never reads back. Building nlohmann's tree of it took most of
// `lab plot`'s time, so the reader walks the tokens once: it fills TraceEvents directly from
// "memgrad_events", keeps "contexts", "device", "policy" and "capacity", and skips everything
// else without building it. The recorder writes keys in sorted order, so "traceEvents" comes
// last: once both arrays are read, the reader stops there and the Perfetto part is not even
// tokenised (nor checked). Every value is checked as it arrives, and a bad one is a TraceError
// naming the event index, the field and the value.
#include <array>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "allocator/error.h"
#include "allocator/trace_replay.h"

namespace memgrad {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxValue = uint64_t{1} << 62;  // times in ns (146 years) and bytes

TraceAction action_from_name(const std::string& name) {
  for (TraceAction a : {TraceAction::Alloc, TraceAction::FreeRequested, TraceAction::FreeCompleted,
                        TraceAction::SegmentAlloc, TraceAction::SegmentFree,
                        TraceAction::SegmentMap, TraceAction::SegmentUnmap, TraceAction::Oom,
                        TraceAction::EmptyCache}) {
    if (trace_action_name(a) == name) return a;
  }
  throw TraceError(fmt::format("trace: unknown action '{}'", name));
}

// The value `v` of `key` (of event `index`) as an integer in [0, max]: negative numbers are not
// read as huge unsigned ones, and times and byte counts stay far enough below 2^63 that sums and
// differences of them cannot overflow. `v` is null when the key was absent.
uint64_t field(const std::optional<Json>& v, const char* key, size_t index, uint64_t max) {
  if (!v) throw TraceError(fmt::format("trace: event {} has no \"{}\"", index, key));
  if (!v->is_number_integer() || (!v->is_number_unsigned() && v->get<int64_t>() < 0) ||
      v->get<uint64_t>() > max) {
    throw TraceError(fmt::format("trace: event {}: \"{}\" is {}, expected an integer in [0, {}]",
                                 index, key, v->dump(), max));
  }
  return v->get<uint64_t>();
}

// The fields of one event, in the order they are stored.
constexpr std::array<const char*, 9> kEventKeys = {
    "action", "t_ns", "addr", "size", "requested", "stream", "allocated", "reserved", "ctx"};
enum EventKey : size_t { kAction, kTime, kAddr, kSize, kRequested, kStream, kAllocated,
                         kReserved, kCtx };

// nlohmann's SAX interface. Containers the reader does not need are skipped by depth.
class TraceHandler {
 public:
  RecordedTrace trace;

  bool null() { return value(Json(nullptr)); }
  bool boolean(bool b) { return value(Json(b)); }
  bool number_integer(Json::number_integer_t v) { return value(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return value(Json(v)); }
  bool number_float(Json::number_float_t v, const std::string&) { return value(Json(v)); }
  bool string(std::string& s) { return value(Json(std::move(s))); }
  bool binary(Json::binary_t&) { return value(Json(nullptr)); }

  bool start_object(size_t) { return open(Json::value_t::object); }
  bool start_array(size_t) { return open(Json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(std::string& k) {
    if (skip_ > 0) return true;
    key_ = std::move(k);
    // Everything the lab reads is in: stop before the Perfetto copy.
    stopped_ = where() == Where::Top && key_ == "traceEvents" && seen_events_ && seen_contexts_;
    return !stopped_;
  }

  // Whether the parse ended on purpose at "traceEvents".
  bool stopped() const { return stopped_; }

  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& e) {
    throw TraceError(fmt::format("trace: not a JSON object (at byte {}: {})", position, e.what()));
  }

  // Checks what can only be checked at the end: both arrays present, contexts in range.
  void finish() {
    if (!seen_events_ || !seen_contexts_) {
      throw TraceError("trace: no \"memgrad_events\" or \"contexts\" array (not a memgrad trace?)");
    }
    for (size_t i = 0; i < trace.events.size(); ++i) check_context(i);
  }

 private:
  enum class Where { Start, Top, Contexts, Context, Events, Event, Done };

  Where where() const { return stack_.empty() ? Where::Start : stack_.back(); }

  // A scalar, or (with `container`) the start of an array or object, in the current place.
  bool value(Json v) {
    if (skip_ > 0) return true;
    switch (where()) {
      case Where::Start:
      case Where::Done:
        throw TraceError("trace: not a JSON object");
      case Where::Top:
        top_level_scalar(v);
        return true;
      case Where::Contexts:
        throw TraceError(fmt::format("trace: context {} is {}, expected an object",
                                     trace.contexts.size(), v.dump()));
      case Where::Events:
        throw TraceError(fmt::format("trace: event {} is {}, expected an object",
                                     trace.events.size(), v.dump()));
      case Where::Context:
        context_field(v);
        return true;
      case Where::Event:
        event_field(std::move(v));
        return true;
    }
    return true;
  }

  bool open(Json::value_t kind) {
    if (skip_ > 0) {
      ++skip_;
      return true;
    }
    const bool is_array = kind == Json::value_t::array;
    switch (where()) {
      case Where::Start:
        if (is_array) throw TraceError("trace: not a JSON object");
        stack_.push_back(Where::Top);
        return true;
      case Where::Top:
        if (key_ == "contexts" && is_array) {
          seen_contexts_ = true;
          stack_.push_back(Where::Contexts);
        } else if (key_ == "memgrad_events" && is_array) {
          seen_events_ = true;
          stack_.push_back(Where::Events);
        } else if (key_ == "contexts" || key_ == "memgrad_events" || key_ == "capacity" ||
                   key_ == "device" || key_ == "policy") {
          top_level_scalar(Json(kind));
        } else {
          skip_ = 1;  // traceEvents and anything else the lab does not read
        }
        return true;
      case Where::Contexts:
        if (is_array) return value(Json(kind));
        trace.contexts.emplace_back();
        stack_.push_back(Where::Context);
        return true;
      case Where::Events:
        if (is_array) return value(Json(kind));
        fields_.fill(std::nullopt);
        stack_.push_back(Where::Event);
        return true;
      case Where::Context:
        context_field(Json(kind));  // refused if it is the phase, op or label
        skip_ = 1;
        return true;
      case Where::Event:
        event_field(Json(kind));  // refused when the event is finished, if it is one of ours
        skip_ = 1;
        return true;
      case Where::Done:
        throw TraceError("trace: not a JSON object");
    }
    return true;
  }

  bool close() {
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    const Where w = where();
    stack_.pop_back();
    if (w == Where::Event) finish_event();
    if (w == Where::Contexts) contexts_done_ = true;
    if (w == Where::Top) stack_.push_back(Where::Done);
    return true;
  }

  void top_level_scalar(const Json& v) {
    if (key_ == "contexts" || key_ == "memgrad_events") {
      throw TraceError(
          "trace: no \"memgrad_events\" or \"contexts\" array (not a memgrad trace?)");
    }
    if (key_ == "device" || key_ == "policy") {
      if (!v.is_string()) {
        throw TraceError(fmt::format("trace: \"{}\" is {}, expected a string", key_, v.dump()));
      }
      (key_ == "device" ? trace.device : trace.policy) = v.get<std::string>();
    } else if (key_ == "capacity") {
      trace.capacity = field(v, "capacity", 0, kMaxValue);
    }
  }

  void context_field(const Json& v) {
    TraceContextRecord& c = trace.contexts.back();
    std::string* into = key_ == "phase" ? &c.phase
                        : key_ == "op"  ? &c.op
                        : key_ == "label" ? &c.label
                                          : nullptr;
    if (into == nullptr) return;
    if (!v.is_string()) {
      throw TraceError(fmt::format("trace: context {}: \"{}\" is {}, expected a string",
                                   trace.contexts.size() - 1, key_, v.dump()));
    }
    *into = v.get<std::string>();
  }

  void event_field(Json v) {
    for (size_t k = 0; k < kEventKeys.size(); ++k) {
      if (key_ == kEventKeys[k]) {
        fields_[k] = std::move(v);
        return;
      }
    }
  }

  void finish_event() {
    const size_t index = trace.events.size();
    const std::optional<Json>& action = fields_[kAction];
    if (!action || !action->is_string()) {
      throw TraceError(fmt::format("trace: event {}: \"action\" is {}, expected a string", index,
                                   action ? action->dump() : "missing"));
    }
    TraceEvent e;
    e.action = action_from_name(action->get_ref<const std::string&>());
    e.time_ns = static_cast<int64_t>(field(fields_[kTime], "t_ns", index, kMaxValue));
    e.address = field(fields_[kAddr], "addr", index, UINT64_MAX);
    e.nbytes = field(fields_[kSize], "size", index, kMaxValue);
    e.requested = field(fields_[kRequested], "requested", index, Allocator::kMaxAllocationBytes);
    e.stream = static_cast<StreamId>(field(fields_[kStream], "stream", index, UINT32_MAX));
    e.allocated = static_cast<int64_t>(field(fields_[kAllocated], "allocated", index, kMaxValue));
    e.reserved = static_cast<int64_t>(field(fields_[kReserved], "reserved", index, kMaxValue));
    e.context = static_cast<uint32_t>(field(fields_[kCtx], "ctx", index, UINT32_MAX));
    trace.events.push_back(e);
    // Contexts written before the events (as the recorder does) are checked here, in order;
    // otherwise finish() checks them once all are known.
    if (contexts_done_) check_context(index);
    if (index > 0 && e.time_ns < trace.events[index - 1].time_ns) {
      throw TraceError(fmt::format("trace: event {} at t_ns {} comes before event {} at {}",
                                   index, e.time_ns, index - 1, trace.events[index - 1].time_ns));
    }
  }

  void check_context(size_t index) const {
    const uint32_t context = trace.events[index].context;
    if (context >= trace.contexts.size()) {
      throw TraceError(fmt::format("trace: event {} refers to context {} of {}", index, context,
                                   trace.contexts.size()));
    }
  }

  std::vector<Where> stack_;
  size_t skip_ = 0;  // depth inside a container being skipped (0: not skipping)
  std::string key_;  // the last key read outside skipped containers
  std::array<std::optional<Json>, kEventKeys.size()> fields_;
  bool seen_contexts_ = false;
  bool seen_events_ = false;
  bool contexts_done_ = false;
  bool stopped_ = false;
};

}  // namespace

RecordedTrace parse_trace(std::string_view json) {
  TraceHandler handler;
  try {
    if (!Json::sax_parse(json, &handler) && !handler.stopped()) {
      throw TraceError("trace: not a JSON object");
    }
  } catch (const Json::exception& e) {
    throw TraceError(fmt::format("trace: malformed event or context: {}", e.what()));
  }
  handler.finish();
  return std::move(handler.trace);
}

RecordedTrace read_trace_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw IoError(fmt::format("trace: cannot open '{}'", path), path);
  std::string text(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(text.data(), static_cast<std::streamsize>(text.size()))) {
    throw IoError(fmt::format("trace: cannot read '{}'", path), path);
  }
  try {
    return parse_trace(text);
  } catch (const TraceError& e) {
    throw TraceError(fmt::format("{} (in '{}')", e.what(), path));
  }
}

}  // namespace memgrad
