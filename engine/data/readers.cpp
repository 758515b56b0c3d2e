// IDX and CSV readers. IDX files may be gzip-compressed (Debian's dataset packages ship them
// so); zlib's gz* functions read both forms.
#include "engine/data/readers.h"

#include <zlib.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/factories.h"

namespace memgrad::data {
namespace {

// The whole (decompressed) content of `path`.
std::string read_all(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw CheckpointError(fmt::format("[read_idx] cannot open '{}'", path));
  std::string out;
  char buffer[1 << 16];
  int n = 0;
  while ((n = gzread(f, buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<size_t>(n));
  int err = 0;
  const char* msg = gzerror(f, &err);
  const std::string why = (n < 0 && msg != nullptr) ? msg : "";
  gzclose(f);
  if (n < 0) throw CheckpointError(fmt::format("[read_idx] '{}' is corrupt: {}", path, why));
  return out;
}

uint32_t big_endian_u32(const std::string& bytes, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + at);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// The file of `name` in `dir`, with or without ".gz".
std::string find_file(const std::string& dir, const std::string& name) {
  for (const std::string& candidate : {dir + "/" + name + ".gz", dir + "/" + name}) {
    if (std::ifstream(candidate).good()) return candidate;
  }
  throw CheckpointError(fmt::format("[load_mnist] '{}' not found in {} (with or without .gz); "
                                    "on Debian: apt-get install dataset-fashion-mnist",
                                    name, dir));
}

}  // namespace

Tensor read_idx(const std::string& path, bool as_labels, double scale) {
  const std::string bytes = read_all(path);
  if (bytes.size() < 4) {
    throw CheckpointError(fmt::format("[read_idx] '{}' is truncated: {} bytes, an IDX header "
                                      "needs at least 4",
                                      path, bytes.size()));
  }
  const auto* header = reinterpret_cast<const unsigned char*>(bytes.data());
  if (header[0] != 0 || header[1] != 0) {
    throw CheckpointError(fmt::format("[read_idx] '{}' is not an IDX file (magic {:02x}{:02x})",
                                      path, header[0], header[1]));
  }
  if (header[2] != 0x08) {
    throw CheckpointError(fmt::format("[read_idx] '{}': element type 0x{:02x} is not supported "
                                      "(only unsigned bytes, 0x08)",
                                      path, header[2]));
  }
  const int ndim = header[3];
  const size_t data_at = 4 + 4 * static_cast<size_t>(ndim);
  if (ndim == 0 || ndim > 4 || bytes.size() < data_at) {
    throw CheckpointError(fmt::format("[read_idx] '{}' has a bad header ({} dimensions, {} bytes)",
                                      path, ndim, bytes.size()));
  }
  // The product of the sizes is checked as it is formed: four 32-bit sizes can overflow it (and
  // numel downstream), and a wrapped count could match the file's length.
  Shape sizes;
  size_t nonzero = 1;
  bool has_zero = false, overflow = false;
  for (int d = 0; d < ndim; ++d) {
    const uint32_t s = big_endian_u32(bytes, 4 + 4 * static_cast<size_t>(d));
    sizes.push_back(s);
    has_zero = has_zero || s == 0;
    if (s != 0 && nonzero > static_cast<size_t>(std::numeric_limits<int64_t>::max()) / s) {
      overflow = true;
    }
    if (s != 0 && !overflow) nonzero *= s;
  }
  if (overflow) {
    throw CheckpointError(fmt::format("[read_idx] '{}' is malformed: header shape {} has more "
                                      "values than can exist, the file holds {}",
                                      path, to_string(sizes), bytes.size() - data_at));
  }
  const size_t count = has_zero ? 0 : nonzero;
  if (bytes.size() != data_at + count) {
    throw CheckpointError(fmt::format("[read_idx] '{}' is truncated or padded: header says {} "
                                      "values of shape {}, the file holds {}",
                                      path, count, to_string(sizes), bytes.size() - data_at));
  }
  const auto* values = reinterpret_cast<const unsigned char*>(bytes.data() + data_at);
  if (as_labels) {
    Tensor t = empty(sizes, kInt64);
    int64_t* out = t.data_ptr<int64_t>();
    for (size_t i = 0; i < count; ++i) out[i] = values[i];
    return t;
  }
  Tensor t = empty(sizes, kFloat32);
  float* out = t.data_ptr<float>();
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<float>(values[i] * scale);
  return t;
}

MnistSplit load_mnist(const std::string& dir) {
  auto images = [&](const std::string& name) {
    Tensor t = read_idx(find_file(dir, name));
    return t.reshape({t.size(0), -1});
  };
  auto labels = [&](const std::string& name) { return read_idx(find_file(dir, name), true); };
  return MnistSplit{
      TensorDataset(images("train-images-idx3-ubyte"), labels("train-labels-idx1-ubyte")),
      TensorDataset(images("t10k-images-idx3-ubyte"), labels("t10k-labels-idx1-ubyte"))};
}

TensorDataset read_csv(const std::string& path, bool has_header, int label_column) {
  std::ifstream in(path);
  if (!in) throw CheckpointError(fmt::format("[read_csv] cannot open '{}'", path));
  std::vector<float> features;
  std::vector<int64_t> labels;
  size_t columns = 0;
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || (has_header && line_no == 1)) continue;
    std::vector<double> row;
    std::stringstream ss(line);
    std::string field;
    while (std::getline(ss, field, ',')) {
      char* end = nullptr;
      const double v = std::strtod(field.c_str(), &end);
      while (end != nullptr && (*end == ' ' || *end == '\r')) ++end;
      if (field.empty() || end == nullptr || *end != '\0') {
        throw CheckpointError(fmt::format("[read_csv] '{}' line {} column {}: '{}' is not a number",
                                          path, line_no, row.size() + 1, field));
      }
      row.push_back(v);
    }
    if (columns == 0) columns = row.size();
    if (row.size() != columns || columns < 2) {
      throw CheckpointError(fmt::format("[read_csv] '{}' line {} has {} columns, expected {}", path,
                                        line_no, row.size(), columns));
    }
    const size_t label = label_column < 0 ? columns - static_cast<size_t>(-label_column)
                                          : static_cast<size_t>(label_column);
    if (label >= columns) {
      throw CheckpointError(fmt::format("[read_csv] '{}': label column {} outside {} columns",
                                        path, label_column, columns));
    }
    for (size_t c = 0; c < columns; ++c) {
      if (c == label) {
        labels.push_back(static_cast<int64_t>(row[c]));
      } else {
        features.push_back(static_cast<float>(row[c]));
      }
    }
  }
  if (labels.empty()) throw CheckpointError(fmt::format("[read_csv] '{}' holds no rows", path));
  const auto n = static_cast<int64_t>(labels.size());
  return TensorDataset(from_vector(features, {n, static_cast<int64_t>(columns - 1)}),
                       from_vector(labels, {n}));
}

}  // namespace memgrad::data
