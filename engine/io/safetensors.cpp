// safetensors encoding, validation and atomic writes.
#include "engine/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "allocator/error.h"
#include "base/atomic_file.h"
#include "engine/copy.h"
#include "engine/error.h"
#include "engine/factories.h"

namespace memgrad::io {
namespace {

// The largest header we accept (safetensors' own limit is 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100 * 1000 * 1000;

const char* format_dtype(DType d) {
  switch (d) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Float16: return "F16";
    case DType::BFloat16: return "BF16";
    case DType::Int64: return "I64";
    case DType::Bool: return "BOOL";
  }
  return "?";
}

// The path a `what` names: "'PATH'" for a file (load_safetensors quotes it), "<memory>" for bytes
// decoded in memory (none), otherwise the caller's own name for the bytes.
std::string path_of(const std::string& what) {
  if (what == "<memory>") return {};
  if (what.size() >= 2 && what.front() == '\'' && what.back() == '\'') {
    return what.substr(1, what.size() - 2);
  }
  return what;
}

DType parse_format_dtype(const std::string& s, const std::string& what, const std::string& name) {
  if (s == "F32") return DType::Float32;
  if (s == "F64") return DType::Float64;
  if (s == "F16") return DType::Float16;
  if (s == "BF16") return DType::BFloat16;
  if (s == "I64") return DType::Int64;
  if (s == "BOOL") return DType::Bool;
  throw CheckpointError(fmt::format("[safetensors] {}: tensor '{}' has dtype '{}', which memgrad "
                                    "does not support (F32, F64, F16, BF16, I64, BOOL)",
                                    what, name, s),
                        "safetensors", path_of(what), name);
}

// `entry`: the tensor at fault, empty when the file as a whole is.
[[noreturn]] void corrupt(const std::string& what, const std::string& why,
                          const std::string& entry = {}) {
  throw CheckpointError(fmt::format("[safetensors] {} is corrupt: {}", what, why), "safetensors",
                        path_of(what), entry);
}

// A SAX pass over the header: rejects duplicate keys at any depth (the format's own loader does;
// nlohmann keeps the last silently) and records the top-level keys in the header's order.
class KeyChecker : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit KeyChecker(const std::string& what) : what_(what) {}
  std::vector<std::string> order;
  std::string error;  // the parser's message when the text is not JSON

  bool start_object(std::size_t) override {
    keys_.emplace_back();
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    return true;
  }
  bool key(string_t& key) override {
    if (!keys_.back().insert(key).second)
      corrupt(what_, fmt::format("duplicate key '{}' in the header", key));
    if (keys_.size() == 1) order.push_back(key);
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error = e.what();
    return false;
  }

 private:
  const std::string& what_;
  std::vector<std::set<std::string>> keys_;  // one set per open object
};

// The header, parsed in time linear in its size: a SAX pass for duplicate keys and the order of
// the tensors, then nlohmann's plain parser (its ordered_json inserts each key in linear time,
// and its parse callbacks rescan the parent object at every closing brace: both quadratic, a
// minute for 200k entries). `order` receives the top-level keys in the header's order.
nlohmann::json parse_header(std::string_view text, const std::string& what,
                            std::vector<std::string>& order) {
  KeyChecker checker(what);
  if (!nlohmann::json::sax_parse(text, &checker)) {
    corrupt(what, fmt::format("the header is not valid JSON ({})", checker.error));
  }
  order = std::move(checker.order);
  return nlohmann::json::parse(text);
}

// One tensor of the header, validated against the data section.
struct Entry {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  size_t begin = 0, end = 0;  // byte offsets into the data section
};

// The shape of tensor `name`, checked before anything multiplies its sizes: a crafted shape must
// not overflow numel (here or in the engine). `count` receives the number of elements.
Shape parse_shape(const std::string& name, const nlohmann::json& sizes, size_t data_size,
                  const std::string& what, uint64_t& count) {
  if (sizes.size() > static_cast<size_t>(kMaxDims)) {
    corrupt(what,
            fmt::format("tensor '{}' has {} dimensions, more than the {} memgrad supports", name,
                        sizes.size(), kMaxDims),
            name);
  }
  Shape shape;
  uint64_t nonzero = 1;  // product of the non-zero sizes
  bool has_zero = false, overflow = false;
  for (const auto& s : sizes) {
    constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if (!s.is_number_unsigned() || s.get<uint64_t>() > kMax) {
      corrupt(what, fmt::format("tensor '{}' has a bad shape", name), name);
    }
    const uint64_t size = s.get<uint64_t>();
    has_zero = has_zero || size == 0;
    if (size != 0 && nonzero > kMax / size) overflow = true;
    if (size != 0 && !overflow) nonzero *= size;
    shape.push_back(static_cast<int64_t>(size));
  }
  count = has_zero ? 0 : nonzero;
  if (overflow || count > data_size) {
    corrupt(what,
            fmt::format("tensor '{}' of shape {} has more elements than the {} data bytes", name,
                        to_string(shape), data_size),
            name);
  }
  return shape;
}

// A header entry checked against the data: dtype, shape, offsets inside the data and spanning
// exactly the tensor's bytes, and for BOOL only the bytes 0 and 1.
Entry parse_entry(const std::string& name, const nlohmann::json& entry, std::string_view data,
                  const std::string& what) {
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
      !entry.contains("data_offsets") || !entry["dtype"].is_string() ||
      !entry["shape"].is_array() || !entry["data_offsets"].is_array() ||
      entry["data_offsets"].size() != 2) {
    corrupt(what, fmt::format("tensor '{}' lacks dtype, shape or a pair of data_offsets", name),
            name);
  }
  Entry e;
  e.name = name;
  e.dtype = parse_format_dtype(entry["dtype"].get<std::string>(), what, name);
  uint64_t count = 0;
  e.shape = parse_shape(name, entry["shape"], data.size(), what, count);
  const auto& offs = entry["data_offsets"];
  if (!offs[0].is_number_unsigned() || !offs[1].is_number_unsigned()) {
    corrupt(what, fmt::format("tensor '{}' has non-integer data offsets", name), name);
  }
  e.begin = offs[0].get<size_t>();
  e.end = offs[1].get<size_t>();
  if (e.begin > e.end || e.end > data.size()) {
    corrupt(what,
            fmt::format("tensor '{}' has offsets [{}, {}) outside the {} data bytes (the "
                        "file is truncated?)",
                        name, e.begin, e.end, data.size()),
            name);
  }
  const size_t expected = count * element_size(e.dtype);
  if (e.end - e.begin != expected) {
    corrupt(what,
            fmt::format("tensor '{}' of shape {} and dtype {} needs {} bytes but its "
                        "offsets span {}",
                        name, to_string(e.shape), dtype_name(e.dtype), expected, e.end - e.begin),
            name);
  }
  if (e.dtype == DType::Bool) {
    const auto* b = reinterpret_cast<const unsigned char*>(data.data() + e.begin);
    const auto* bad = std::find_if(b, b + expected, [](unsigned char c) { return c > 1; });
    if (bad != b + expected) {
      corrupt(what, fmt::format("BOOL tensor '{}' holds the byte {} at element {} (only 0 and 1 "
                                "are booleans)",
                                name, *bad, bad - b));
    }
  }
  return e;
}

// The tensors, sorted by offset, tile the data section exactly, as the format's own loader
// requires: no byte shared by two tensors, none that belongs to no tensor.
void check_tiling(const std::vector<Entry>& entries, size_t data_size, const std::string& what) {
  size_t covered = 0;
  for (const Entry& e : entries) {
    if (e.begin != covered) {
      corrupt(what, e.begin < covered
                        ? fmt::format("two tensors overlap in the data at byte {}", e.begin)
                        : fmt::format("bytes {} to {} of the data belong to no tensor", covered,
                                      e.begin));
    }
    covered = e.end;
  }
  if (covered != data_size) {
    corrupt(what, fmt::format("the tensors end at byte {} of the data but it holds {} (the file "
                              "is padded or a tensor is missing)",
                              covered, data_size));
  }
}

}  // namespace

std::string encode_safetensors(const SafetensorsFile& file) {
  // A sorted header (readers find tensors by their offsets, not by the order of the keys);
  // nlohmann's ordered_json would insert each key in linear time.
  nlohmann::json header = nlohmann::json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  std::set<std::string> names;
  for (const auto& [name, t] : file.tensors) {
    if (name == "__metadata__") {
      throw CheckpointError(
          "[safetensors] a tensor cannot be named '__metadata__' (the format "
          "keeps that key for the metadata)",
          "safetensors", "", "__metadata__");
    }
    if (!names.insert(name).second) {
      throw CheckpointError(fmt::format("[safetensors] two tensors are named '{}'", name),
                            "safetensors", "", name);
    }
  }
  std::string data;
  for (const auto& [name, t] : file.tensors) {
    // Host, contiguous, little-endian (x86-64 and every CUDA host are little-endian).
    const Tensor host = to_device(t.detach(), kCPU).contiguous();
    const size_t begin = data.size();
    data.append(static_cast<const char*>(host.data_ptr()), host.nbytes());
    header[name] = {{"dtype", format_dtype(t.dtype())},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {begin, data.size()}}};
  }
  std::string json;
  try {
    json = header.dump();
  } catch (const nlohmann::json::type_error& e) {  // a name or value that is not UTF-8
    throw CheckpointError(fmt::format("[safetensors] tensor names and metadata must be valid "
                                      "UTF-8 ({})",
                                      e.what()),
                          "safetensors");
  }
  json.append((8 - json.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned
  std::string out(8, '\0');
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json + data;
}

SafetensorsFile decode_safetensors(const std::string& bytes, const std::string& what,
                                   Device device) {
  if (bytes.size() < 8)
    corrupt(what, fmt::format("{} bytes, too short for the header length", bytes.size()));
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= uint64_t{static_cast<unsigned char>(bytes[static_cast<size_t>(i)])} << (8 * i);
  if (n > kMaxHeaderBytes || n > bytes.size() - 8) {
    corrupt(what,
            fmt::format("the header claims {} bytes but only {} follow", n, bytes.size() - 8));
  }
  std::vector<std::string> order;
  const nlohmann::json header = parse_header(std::string_view(bytes).substr(8, n), what, order);
  if (!header.is_object()) corrupt(what, "the header is not a JSON object");
  const std::string_view data = std::string_view(bytes).substr(8 + n);
  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const std::string& name : order) {
    const nlohmann::json& entry = header.at(name);
    if (name == "__metadata__") {
      if (!entry.is_object()) corrupt(what, "__metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) corrupt(what, fmt::format("metadata '{}' is not a string", k));
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(name, entry, data, what));
  }
  // The file's order: offsets ascending, as writers lay tensors out (an empty tensor before the
  // one that starts where it does; equal ranges in the header's order).
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  check_tiling(entries, data.size(), what);
  // Everything is checked before the first tensor is allocated; they are allocated in the file's
  // order, which is also the order the caller frees them in when it drops the state dict.
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data.data() + e.begin, e.end - e.begin);
    out.tensors.emplace_back(e.name, device == kCPU ? t : to_device(t, device));
  }
  return out;
}

void save_safetensors(const std::string& path, const SafetensorsFile& file) {
  const std::string bytes = encode_safetensors(file);
  try {
    write_file_atomically(path, bytes);
  } catch (const IoError& e) {
    throw CheckpointError(fmt::format("[safetensors] {}", e.what()), "safetensors", path);
  }
}

SafetensorsFile load_safetensors(const std::string& path, Device device) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw CheckpointError(fmt::format("[safetensors] cannot open '{}'", path), "safetensors", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return decode_safetensors(ss.str(), "'" + path + "'", device);
}

}  // namespace memgrad::io
