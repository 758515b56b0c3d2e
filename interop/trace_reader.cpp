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
#include "interop/trace_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "allocator/allocator.h"
#include "allocator/error.h"
#include "interop/error.h"

namespace memgrad {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxValue = uint64_t{1} << 62;  // times in ns (146 years) and bytes

std::optional<TraceAction> action_named(std::string_view name) {
  for (TraceAction a : {TraceAction::Alloc, TraceAction::FreeRequested, TraceAction::FreeCompleted,
                        TraceAction::SegmentAlloc, TraceAction::SegmentFree,
                        TraceAction::SegmentMap, TraceAction::SegmentUnmap, TraceAction::Oom,
                        TraceAction::EmptyCache, TraceAction::Snapshot}) {
    if (trace_action_name(a) == name) return a;
  }
  return std::nullopt;
}

TraceAction action_from_name(const std::string& name) {
  if (const std::optional<TraceAction> a = action_named(name)) return *a;
  throw TraceError(fmt::format("trace: unknown action '{}'", name), "", "action");
}

// The value `v` of `key` (of event `index`) as an integer in [0, max]: negative numbers are not
// read as huge unsigned ones, and times and byte counts stay far enough below 2^63 that sums and
// differences of them cannot overflow. `v` is null when the key was absent.
uint64_t field(const std::optional<Json>& v, const char* key, size_t index, uint64_t max) {
  if (!v)
    throw TraceError(fmt::format("trace: event {} has no \"{}\"", index, key),
                     fmt::format("memgrad_events[{}]", index), key);
  if (!v->is_number_integer() || (!v->is_number_unsigned() && v->get<int64_t>() < 0) ||
      v->get<uint64_t>() > max) {
    throw TraceError(fmt::format("trace: event {}: \"{}\" is {}, expected an integer in [0, {}]",
                                 index, key, v->dump(), max),
                     fmt::format("memgrad_events[{}]", index), key);
  }
  return v->get<uint64_t>();
}

// The fields of one event, in the order they are stored.
constexpr std::array<const char*, 9> kEventKeys = {
    "action", "t_ns", "addr", "size", "requested", "stream", "allocated", "reserved", "ctx"};
enum EventKey : size_t {
  kAction,
  kTime,
  kAddr,
  kSize,
  kRequested,
  kStream,
  kAllocated,
  kReserved,
  kCtx
};

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
      case Where::Done: throw TraceError("trace: not a JSON object");
      case Where::Top: top_level_scalar(v); return true;
      case Where::Contexts:
        throw TraceError(fmt::format("trace: context {} is {}, expected an object",
                                     trace.contexts.size(), v.dump()),
                         fmt::format("contexts[{}]", trace.contexts.size()));
      case Where::Events:
        throw TraceError(
            fmt::format("trace: event {} is {}, expected an object", trace.events.size(), v.dump()),
            fmt::format("memgrad_events[{}]", trace.events.size()));
      case Where::Context: context_field(v); return true;
      case Where::Event: event_field(std::move(v)); return true;
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
      case Where::Done: throw TraceError("trace: not a JSON object");
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
      throw TraceError("trace: no \"memgrad_events\" or \"contexts\" array (not a memgrad trace?)");
    }
    if (key_ == "device" || key_ == "policy") {
      if (!v.is_string()) {
        throw TraceError(fmt::format("trace: \"{}\" is {}, expected a string", key_, v.dump()), "",
                         key_);
      }
      (key_ == "device" ? trace.device : trace.policy) = v.get<std::string>();
    } else if (key_ == "capacity") {
      trace.capacity = field(v, "capacity", 0, kMaxValue);
    }
  }

  void context_field(const Json& v) {
    TraceContextRecord& c = trace.contexts.back();
    std::string* into = key_ == "phase"    ? &c.phase
                        : key_ == "op"     ? &c.op
                        : key_ == "label"  ? &c.label
                        : key_ == "module" ? &c.module
                                           : nullptr;
    if (into == nullptr) return;
    if (!v.is_string()) {
      throw TraceError(fmt::format("trace: context {}: \"{}\" is {}, expected a string",
                                   trace.contexts.size() - 1, key_, v.dump()),
                       fmt::format("contexts[{}]", trace.contexts.size() - 1), key_);
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
                                   action ? action->dump() : "missing"),
                       fmt::format("memgrad_events[{}]", index), "action");
    }
    TraceEvent e;
    e.action = action_from_name(action->get_ref<const std::string&>());
    e.time_ns = static_cast<int64_t>(field(fields_[kTime], "t_ns", index, kMaxValue));
    e.address = field(fields_[kAddr], "addr", index, UINT64_MAX);
    e.nbytes = field(fields_[kSize], "size", index, kMaxValue);
    e.requested = field(fields_[kRequested], "requested", index, kMaxAllocationBytes);
    e.stream = static_cast<StreamId>(field(fields_[kStream], "stream", index, UINT32_MAX));
    e.allocated = static_cast<int64_t>(field(fields_[kAllocated], "allocated", index, kMaxValue));
    e.reserved = static_cast<int64_t>(field(fields_[kReserved], "reserved", index, kMaxValue));
    e.context = static_cast<uint32_t>(field(fields_[kCtx], "ctx", index, UINT32_MAX));
    trace.events.push_back(e);
    // Contexts written before the events (as the recorder does) are checked here, in order;
    // otherwise finish() checks them once all are known.
    if (contexts_done_) check_context(index);
    if (index > 0 && e.time_ns < trace.events[index - 1].time_ns) {
      throw TraceError(fmt::format("trace: event {} at t_ns {} comes before event {} at {}", index,
                                   e.time_ns, index - 1, trace.events[index - 1].time_ns),
                       fmt::format("memgrad_events[{}]", index), "t_ns");
    }
  }

  void check_context(size_t index) const {
    const uint32_t context = trace.events[index].context;
    if (context >= trace.contexts.size()) {
      throw TraceError(fmt::format("trace: event {} refers to context {} of {}", index, context,
                                   trace.contexts.size()),
                       fmt::format("memgrad_events[{}]", index), "ctx");
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

// The recorder's own layout, read without a JSON library: exactly the text trace_to_json writes
// up to "traceEvents" (its keys in its order, no spaces, strings of printable ASCII without
// escapes, integers without sign, fraction or leading zero). At the first byte that differs, or a
// value TraceHandler would refuse, it gives up and parse_trace reads the text again with
// TraceHandler, which words the error: this path changes how long a trace takes to read, never
// what is read.
class CanonicalReader {
 public:
  explicit CanonicalReader(std::string_view text) : p_(text.data()), end_(p_ + text.size()) {}

  std::optional<RecordedTrace> read() {
    RecordedTrace t;
    uint64_t capacity = 0;
    if (!literal("{\"capacity\":") || !number(capacity, kMaxValue) || !literal(",\"contexts\":[")) {
      return std::nullopt;
    }
    t.capacity = static_cast<size_t>(capacity);
    for (bool first = true; !literal("]"); first = false) {
      TraceContextRecord& c = t.contexts.emplace_back();
      if ((!first && !literal(",")) || !literal("{\"label\":") || !text(c.label) ||
          !literal(",\"module\":") || !text(c.module) || !literal(",\"op\":") || !text(c.op) ||
          !literal(",\"phase\":") || !text(c.phase) || !literal("}")) {
        return std::nullopt;
      }
    }
    if (!literal(",\"device\":") || !text(t.device) ||
        !literal(",\"displayTimeUnit\":\"ns\",\"memgrad_events\":[")) {
      return std::nullopt;
    }
    for (bool first = true; !literal("]"); first = false) {
      if ((!first && !literal(",")) || !event(t)) return std::nullopt;
    }
    // The names (TraceName) are for tools/memory_categories.py: checked as read, not kept.
    if (!literal(",\"memgrad_names\":[")) return std::nullopt;
    for (bool first = true; !literal("]"); first = false) {
      if ((!first && !literal(",")) || !name()) return std::nullopt;
    }
    if (!literal(",\"memgrad_trace_version\":1,\"policy\":") || !text(t.policy) ||
        !literal(",\"traceEvents\":")) {
      return std::nullopt;
    }
    return t;
  }

 private:
  bool literal(std::string_view s) {
    if (static_cast<size_t>(end_ - p_) < s.size() || std::memcmp(p_, s.data(), s.size()) != 0) {
      return false;
    }
    p_ += s.size();
    return true;
  }

  // An integer in [0, max]; false for a sign, a leading zero, a fraction or an exponent.
  bool number(uint64_t& v, uint64_t max) {
    const char* start = p_;
    v = 0;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') {
      const auto digit = static_cast<uint64_t>(*p_ - '0');
      if (v > (UINT64_MAX - digit) / 10) return false;
      v = v * 10 + digit;
      ++p_;
    }
    const auto digits = p_ - start;
    if (digits == 0 || (digits > 1 && *start == '0') || v > max) return false;
    return p_ == end_ || (*p_ != '.' && *p_ != 'e' && *p_ != 'E');
  }

  // A string of printable ASCII; escapes and other bytes (UTF-8) are left to the JSON reader.
  bool text(std::string& out) {
    if (!literal("\"")) return false;
    const char* start = p_;
    while (p_ < end_ && *p_ != '"') {
      if (*p_ < 0x20 || *p_ > 0x7e || *p_ == '\\') return false;
      ++p_;
    }
    if (p_ == end_) return false;
    out.assign(start, p_);
    ++p_;
    return true;
  }

  bool name() {
    uint64_t addr = 0, event = 0;
    return literal("{\"addr\":") && number(addr, UINT64_MAX) && literal(",\"event\":") &&
           number(event, kMaxValue) && literal(",\"module\":") && text(name_) &&
           literal(",\"role\":") && text(name_) && literal("}");
  }

  bool event(RecordedTrace& t) {
    uint64_t addr = 0, allocated = 0, ctx = 0, requested = 0, reserved = 0, size = 0;
    uint64_t stream = 0, time = 0;
    if (!literal("{\"action\":") || !text(action_) || !literal(",\"addr\":") ||
        !number(addr, UINT64_MAX) || !literal(",\"allocated\":") || !number(allocated, kMaxValue) ||
        !literal(",\"ctx\":") || !number(ctx, UINT32_MAX) || !literal(",\"requested\":") ||
        !number(requested, kMaxAllocationBytes) || !literal(",\"reserved\":") ||
        !number(reserved, kMaxValue) || !literal(",\"size\":") || !number(size, kMaxValue) ||
        !literal(",\"stream\":") || !number(stream, UINT32_MAX) || !literal(",\"t_ns\":") ||
        !number(time, kMaxValue) || !literal("}")) {
      return false;
    }
    const std::optional<TraceAction> action = action_named(action_);
    if (!action || ctx >= t.contexts.size() ||
        (!t.events.empty() && static_cast<int64_t>(time) < t.events.back().time_ns)) {
      return false;
    }
    TraceEvent& e = t.events.emplace_back();
    e.action = *action;
    e.time_ns = static_cast<int64_t>(time);
    e.address = addr;
    e.nbytes = size;
    e.requested = requested;
    e.stream = static_cast<StreamId>(stream);
    e.allocated = static_cast<int64_t>(allocated);
    e.reserved = static_cast<int64_t>(reserved);
    e.context = static_cast<uint32_t>(ctx);
    return true;
  }

  const char* p_;
  const char* end_;
  std::string action_;  // reused: no allocation per event
  std::string name_;    // the same, for the names' strings
};

}  // namespace

namespace detail {

std::optional<RecordedTrace> parse_canonical_trace(std::string_view json) {
  return CanonicalReader(json).read();
}

RecordedTrace parse_trace_general(std::string_view json) {
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

}  // namespace detail

RecordedTrace parse_trace(std::string_view json) {
  if (std::optional<RecordedTrace> trace = detail::parse_canonical_trace(json)) {
    return *std::move(trace);
  }
  return detail::parse_trace_general(json);
}

RecordedTrace read_trace_file(const std::string& path) {
  // A regular file is mapped, not copied: the reader touches only the pages up to "traceEvents",
  // and a trace of 10^6 events is 250 MB. Anything else (a pipe, /dev/stdin) is read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    throw IoError(fmt::format("trace: cannot open '{}': {}", path, std::strerror(error)), path,
                  error);
  }
  struct stat st {};
  const bool mappable = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
  void* mapped =
      mappable ? ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0)
               : MAP_FAILED;
  std::string copy;
  if (mapped == MAP_FAILED) {
    char buffer[1 << 16];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof(buffer))) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int error = errno;
        ::close(fd);
        throw IoError(fmt::format("trace: cannot read '{}': {}", path, std::strerror(error)), path,
                      error);
      }
      copy.append(buffer, static_cast<size_t>(n));
    }
  }
  ::close(fd);  // a mapping outlives its descriptor
  struct Unmap {
    void* at;
    size_t size;
    ~Unmap() {
      if (at != MAP_FAILED) ::munmap(at, size);
    }
  } unmap{mapped, mappable ? static_cast<size_t>(st.st_size) : 0};
  const std::string_view text = mapped != MAP_FAILED
                                    ? std::string_view(static_cast<const char*>(mapped), unmap.size)
                                    : std::string_view(copy);
  try {
    return parse_trace(text);
  } catch (const TraceError& e) {
    throw TraceError(fmt::format("{} (in '{}')", e.what(), path), e.place, e.field, path);
  }
}

}  // namespace memgrad
