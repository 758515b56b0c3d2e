// IDX and CSV readers. IDX files may be gzip-compressed (Debian's dataset packages ship them
// so); zlib's gz* functions read both forms.
#include "engine/data/readers.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/factories.h"

namespace memgrad::data {
namespace {

// A gzip or plain file read in pieces, so that a header can be checked before the data is read
// (a small .gz file can inflate to gigabytes).
class IdxInput {
 public:
  explicit IdxInput(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (file_ == nullptr)
      throw CheckpointError(fmt::format("[read_idx] cannot open '{}'", path), "read_idx", path, "");
  }
  ~IdxInput() { gzclose(file_); }
  IdxInput(const IdxInput&) = delete;
  IdxInput& operator=(const IdxInput&) = delete;

  // Up to `n` bytes into `out`; fewer only at the end of the data.
  size_t read(unsigned char* out, size_t n) {
    size_t done = 0;
    while (done < n) {
      const auto chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
      const int got = gzread(file_, out + done, chunk);
      if (got < 0) {
        int err = 0;
        const char* msg = gzerror(file_, &err);
        throw CheckpointError(fmt::format("[read_idx] '{}' is corrupt: {}", path_,
                                          msg != nullptr ? msg : "read error"),
                              "read_idx", path_, "");
      }
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    return done;
  }

 private:
  std::string path_;
  gzFile file_;
};

uint32_t big_endian_u32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// The file of `name` in `dir`, with or without ".gz".
std::string find_file(const std::string& dir, const std::string& name) {
  for (const std::string& candidate : {dir + "/" + name + ".gz", dir + "/" + name}) {
    if (std::ifstream(candidate).good()) return candidate;
  }
  throw CheckpointError(fmt::format("[load_mnist] '{}' not found in {} (with or without .gz); "
                                    "on Debian: apt-get install dataset-fashion-mnist",
                                    name, dir),
                        "load_mnist", dir, name);
}

}  // namespace

Tensor read_idx(const std::string& path, bool as_labels, double scale) {
  IdxInput in(path);
  unsigned char header[4 + 4 * 4] = {};
  if (in.read(header, 4) < 4) {
    throw CheckpointError(fmt::format("[read_idx] '{}' is truncated: an IDX header needs at "
                                      "least 4 bytes",
                                      path),
                          "read_idx", path);
  }
  if (header[0] != 0 || header[1] != 0) {
    throw CheckpointError(fmt::format("[read_idx] '{}' is not an IDX file (magic {:02x}{:02x})",
                                      path, header[0], header[1]),
                          "read_idx", path);
  }
  if (header[2] != 0x08) {
    throw CheckpointError(fmt::format("[read_idx] '{}': element type 0x{:02x} is not supported "
                                      "(only unsigned bytes, 0x08)",
                                      path, header[2]),
                          "read_idx", path);
  }
  const int ndim = header[3];
  if (ndim == 0 || ndim > 4 ||
      in.read(header + 4, 4 * static_cast<size_t>(ndim)) < 4 * static_cast<size_t>(ndim)) {
    throw CheckpointError(
        fmt::format("[read_idx] '{}' has a bad header ({} dimensions)", path, ndim), "read_idx",
        path);
  }
  // The product of the sizes is checked as it is formed: four 32-bit sizes can overflow it (and
  // numel downstream).
  Shape sizes;
  size_t nonzero = 1;
  bool has_zero = false, overflow = false;
  for (int d = 0; d < ndim; ++d) {
    const uint32_t s = big_endian_u32(header + 4 + 4 * d);
    sizes.push_back(s);
    has_zero = has_zero || s == 0;
    if (s != 0 && nonzero > static_cast<size_t>(std::numeric_limits<int64_t>::max()) / s) {
      overflow = true;
    }
    if (s != 0 && !overflow) nonzero *= s;
  }
  if (overflow) {
    throw CheckpointError(fmt::format("[read_idx] '{}' is malformed: header shape {} has more "
                                      "values than can exist",
                                      path, to_string(sizes)),
                          "read_idx", path);
  }
  const size_t count = has_zero ? 0 : nonzero;
  // The output is allocated at the size the header declares (a typed OOM if that is absurd),
  // and the file is inflated a chunk at a time, never past that size.
  Tensor t = empty(sizes, as_labels ? kInt64 : kFloat32);
  unsigned char chunk[1 << 16];
  size_t got = 0;
  while (got < count) {
    const size_t n = in.read(chunk, std::min(sizeof chunk, count - got));
    if (n == 0) break;
    if (as_labels) {
      int64_t* out = t.data_ptr<int64_t>() + got;
      for (size_t i = 0; i < n; ++i) out[i] = chunk[i];
    } else {
      float* out = t.data_ptr<float>() + got;
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(chunk[i] * scale);
    }
    got += n;
  }
  if (got != count || in.read(chunk, 1) != 0) {
    throw CheckpointError(
        fmt::format("[read_idx] '{}' is truncated or padded: header says {} "
                    "values of shape {}, the file holds {}",
                    path, count, to_string(sizes), got == count ? "more" : fmt::format("{}", got)),
        "read_idx", path);
  }
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
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw CheckpointError(fmt::format("[read_csv] cannot open '{}'", path), "read_csv", path);
  std::vector<float> features;
  std::vector<int64_t> labels;
  size_t columns = 0;
  size_t label = 0;
  std::string line;
  size_t line_no = 0;
  auto fail = [&](size_t column, const std::string& why) {
    throw CheckpointError(
        fmt::format("[read_csv] '{}' line {} column {}: {}", path, line_no, column, why),
        "read_csv", path, fmt::format("line {} column {}", line_no, column));
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (has_header && line_no == 1)) continue;
    if (const size_t nul = line.find('\0'); nul != std::string::npos) {
      fail(static_cast<size_t>(
               std::count(line.begin(), line.begin() + static_cast<ptrdiff_t>(nul), ',')) +
               1,
           "a NUL byte (binary data?)");
    }
    // Fields split at every comma, so "1,2," has an empty third field rather than two fields.
    std::vector<std::string> fields;
    size_t start = 0;
    for (size_t comma = line.find(',');; comma = line.find(',', start)) {
      fields.push_back(
          line.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (columns == 0) {
      columns = fields.size();
      // label_column counts from the end when negative; done in int64 so that INT_MIN cannot
      // overflow.
      const int64_t at = label_column < 0 ? static_cast<int64_t>(columns) + label_column
                                          : static_cast<int64_t>(label_column);
      if (columns < 2 || at < 0 || at >= static_cast<int64_t>(columns)) {
        throw CheckpointError(fmt::format("[read_csv] '{}': label column {} outside the {} "
                                          "columns of line {} (at least 2 needed)",
                                          path, label_column, columns, line_no),
                              "read_csv", path, fmt::format("column {}", label_column));
      }
      label = static_cast<size_t>(at);
    }
    if (fields.size() != columns) {
      throw CheckpointError(fmt::format("[read_csv] '{}' line {} has {} columns, expected {}", path,
                                        line_no, fields.size(), columns),
                            "read_csv", path, fmt::format("line {}", line_no));
    }
    for (size_t c = 0; c < columns; ++c) {
      const std::string& field = fields[c];
      const size_t first = field.find_first_not_of(' ');
      const size_t last = field.find_last_not_of(' ');
      if (first == std::string::npos) fail(c + 1, "an empty field");
      const std::string text = field.substr(first, last - first + 1);
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (end != text.c_str() + text.size()) fail(c + 1, fmt::format("'{}' is not a number", text));
      if (c == label) {
        // Labels are class indices: whole numbers in [0, 2^53), not nan, 2.7 or 1e300.
        if (!(v >= 0.0 && v < 9007199254740992.0 && v == std::floor(v))) {
          fail(c + 1, fmt::format("label '{}' is not a class index (an integer >= 0)", text));
        }
        labels.push_back(static_cast<int64_t>(v));
      } else {
        if (!std::isfinite(v) || std::abs(v) > std::numeric_limits<float>::max()) {
          fail(c + 1, fmt::format("'{}' is not a finite float32", text));
        }
        features.push_back(static_cast<float>(v));
      }
    }
  }
  if (labels.empty())
    throw CheckpointError(fmt::format("[read_csv] '{}' holds no rows", path), "read_csv", path);
  const auto n = static_cast<int64_t>(labels.size());
  return TensorDataset(from_vector(features, {n, static_cast<int64_t>(columns - 1)}),
                       from_vector(labels, {n}));
}

}  // namespace memgrad::data
