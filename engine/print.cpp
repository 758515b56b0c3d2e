// Printing tensors like PyTorch: tensor([[0.1000, 2.0000], ...], dtype=float64, device='sim:0').
//
// Floats print with 4 decimals (or as "1." when every value is an integer, or in scientific
// notation when the magnitudes span too much), aligned to the widest value; more than 1000
// elements are summarised with the first and last 3 of each dimension around "...".
#include <cmath>
#include <ostream>

#include <fmt/format.h>

#include "engine/autograd_seam.h"
#include "engine/tensor.h"

namespace memgrad {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

struct Format {
  enum class Kind { Integer, IntegralFloat, Fixed, Scientific, Bool } kind = Kind::Fixed;
  int width = 1;
};

std::string format_value(double v, const Format& f) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  switch (f.kind) {
    case Format::Kind::Integer: return fmt::format("{}", static_cast<int64_t>(v));
    case Format::Kind::Bool: return v != 0.0 ? "True" : "False";
    case Format::Kind::IntegralFloat: return fmt::format("{:.0f}.", v);
    case Format::Kind::Fixed: return fmt::format("{:.4f}", v);
    case Format::Kind::Scientific: return fmt::format("{:.4e}", v);
  }
  return "";
}

Format choose_format(const std::vector<double>& values, DType dtype) {
  Format f;
  if (dtype == kBool) {
    f.kind = Format::Kind::Bool;
  } else if (!is_floating(dtype)) {
    f.kind = Format::Kind::Integer;
  } else {
    bool integral = true;
    double max_abs = 0.0, min_abs = INFINITY;
    for (double v : values) {
      if (!std::isfinite(v)) continue;
      integral = integral && v == std::floor(v);
      max_abs = std::max(max_abs, std::abs(v));
      if (v != 0.0) min_abs = std::min(min_abs, std::abs(v));
    }
    if (integral && max_abs < 1e8) {
      f.kind = Format::Kind::IntegralFloat;
    } else if (max_abs >= 1e8 || (min_abs < 1e-4) || (max_abs / min_abs > 1e3 && min_abs < 1e-2)) {
      f.kind = Format::Kind::Scientific;
    } else {
      f.kind = Format::Kind::Fixed;
    }
  }
  for (double v : values) f.width = std::max(f.width, static_cast<int>(format_value(v, f).size()));
  return f;
}

// Recursive printer over a contiguous double copy of the values.
class Printer {
 public:
  Printer(const Shape& sizes, const std::vector<double>& values, bool summarize)
      : sizes_(sizes), values_(values), summarize_(summarize) {
    format_ = choose_format(values, DType::Float32);
  }
  void set_format(const Format& f) { format_ = f; }

  std::string print(int dim, int64_t offset, int indent) const {
    if (dim == sizes_.size()) return pad(format_value(values_[static_cast<size_t>(offset)], format_));
    int64_t stride = 1;
    for (int d = dim + 1; d < sizes_.size(); ++d) stride *= sizes_[d];
    const int64_t n = sizes_[dim];
    std::string out = "[";
    const bool last_dim = dim == sizes_.size() - 1;
    const std::string sep =
        last_dim ? ", " : "," + std::string(static_cast<size_t>(sizes_.size() - dim - 1), '\n') +
                              std::string(static_cast<size_t>(indent + 1), ' ');
    bool first = true;
    for (int64_t i = 0; i < n; ++i) {
      if (summarize_ && n > 2 * kEdgeItems && i == kEdgeItems) {
        out += sep + "...";
        i = n - kEdgeItems - 1;
        continue;
      }
      if (!first) out += sep;
      first = false;
      out += print(dim + 1, offset + i * stride, indent + 1);
    }
    return out + "]";
  }

 private:
  std::string pad(const std::string& s) const {
    return std::string(static_cast<size_t>(std::max(0, format_.width - static_cast<int>(s.size()))), ' ') + s;
  }
  const Shape& sizes_;
  const std::vector<double>& values_;
  bool summarize_;
  Format format_;
};

// The values that will be shown (all of them, or the edges when summarising).
std::vector<double> shown_values(const std::vector<double>& values, const Shape& sizes,
                                 bool summarize) {
  if (!summarize) return values;
  std::vector<double> out;
  const int64_t row = sizes.empty() ? 1 : sizes.back();
  for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i) {
    const int64_t col = i % row;
    if (col < kEdgeItems || col >= row - kEdgeItems) out.push_back(values[static_cast<size_t>(i)]);
  }
  return out;
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::vector<double> values = to_vector<double>();
  const bool summarize = numel() > kSummarizeAbove;
  const Format f = choose_format(shown_values(values, sizes(), summarize), dtype());
  std::string body;
  if (dim() == 0) {
    body = format_value(values[0], f);
  } else if (numel() == 0) {
    body = "[]";
  } else {
    Printer p(sizes(), values, summarize);
    p.set_format(f);
    body = p.print(0, 0, 7);  // 7 = strlen("tensor(")
  }
  std::string suffix;
  if (numel() == 0 && dim() != 1) suffix += fmt::format(", size={}", to_string(sizes()));
  if (dtype() != kFloat32 && dtype() != kInt64 && dtype() != kBool) {
    suffix += fmt::format(", dtype={}", dtype_name(dtype()));
  }
  if (!device().is_cpu()) suffix += fmt::format(", device='{}'", device().str());
  const std::string grad_fn = grad_fn_name();
  if (!grad_fn.empty()) {
    suffix += fmt::format(", grad_fn=<{}>", grad_fn);
  } else if (requires_grad()) {
    suffix += ", requires_grad=True";
  }
  return "tensor(" + body + suffix + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace memgrad
