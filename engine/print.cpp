// Printing tensors like PyTorch (torch/_tensor_str.py, default print options):
//   tensor([[1.5000, 2.0000],
//           [3.0000, 4.0000]], device='sim:0', dtype=float64)
//
// Floats print with 4 decimals, or as "1." when every value is an integer, or in scientific
// notation when the nonzero magnitudes span more than 1e3, exceed 1e8 or (non-integers) go
// below 1e-4. The width comes from the nonzero finite values only and every value is padded to
// it. Rows wrap at 80 columns. More than 1000 elements are summarised with the first and last 3
// of each dimension around "...", and only those edges choose the format. The printer copies
// the tensor to the host (allocates numel x 8 bytes of host memory) and nothing on the device.
#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>

#include "engine/autograd_seam.h"
#include "engine/tensor.h"

namespace memgrad {
namespace {

constexpr int64_t kSummarizeAbove = 1000;  // PyTorch's print threshold, in elements
constexpr int64_t kEdgeItems = 3;          // items kept at each end of a summarised dimension
constexpr int kLineWidth = 80;             // characters per line
constexpr int kPrecision = 4;              // decimals
constexpr int kIndent = 7;                 // strlen("tensor(")

// The tensor's values on the host, row-major: floats as double, int64 and bool as int64.
struct HostValues {
  Shape sizes;
  DType dtype = kFloat32;
  std::vector<double> floats;
  std::vector<int64_t> ints;
};

// PyTorch's _Formatter: the mode and width chosen once from the values that will be shown.
class Formatter {
 public:
  Formatter(const HostValues& v, const std::vector<int64_t>& shown) : v_(v) {
    if (is_floating(v.dtype)) {
      choose_float_mode(shown);
    } else {
      for (int64_t i : shown) width_ = std::max(width_, static_cast<int>(raw(i).size()));
    }
  }

  int width() const { return width_; }

  // Element `i` (flat, row-major) padded on the left to the common width.
  std::string format(int64_t i) const {
    const std::string s = raw(i);
    return std::string(static_cast<size_t>(std::max(0, width_ - static_cast<int>(s.size()))), ' ') +
           s;
  }

 private:
  std::string raw(int64_t i) const {
    const size_t k = static_cast<size_t>(i);
    if (v_.dtype == kBool) return v_.ints[k] != 0 ? "True" : "False";
    if (!is_floating(v_.dtype)) return fmt::format("{}", v_.ints[k]);
    return format_float(v_.floats[k]);
  }

  std::string format_float(double x) const {
    // Python prints nan without a sign and never appends "." to a non-finite value.
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    if (sci_) return fmt::format("{:.{}e}", x, kPrecision);
    if (int_mode_) return fmt::format("{:.0f}.", x);
    return fmt::format("{:.{}f}", x, kPrecision);
  }

  void choose_float_mode(const std::vector<int64_t>& shown) {
    std::vector<double> nonzero;
    for (int64_t i : shown) {
      const double x = v_.floats[static_cast<size_t>(i)];
      if (std::isfinite(x) && x != 0.0) nonzero.push_back(x);
    }
    if (nonzero.empty()) return;  // only zeros and non-finite values: "0.", width 1
    double lo = INFINITY, hi = 0.0;
    for (double x : nonzero) {
      lo = std::min(lo, std::abs(x));
      hi = std::max(hi, std::abs(x));
      int_mode_ = int_mode_ && x == std::ceil(x);
    }
    sci_ = hi / lo > 1000.0 || hi > 1.0e8 || (!int_mode_ && lo < 1.0e-4);
    for (double x : nonzero) {
      width_ = std::max(width_, static_cast<int>(format_float(x).size()));
    }
  }

  const HostValues& v_;
  bool int_mode_ = true;
  bool sci_ = false;
  int width_ = 1;
};

// Row-major element strides of `sizes`.
int64_t row_stride(const Shape& sizes, int dim) {
  int64_t stride = 1;
  for (int d = dim + 1; d < sizes.size(); ++d) stride *= sizes[d];
  return stride;
}

// The indices along a dimension of `n` that are printed (all, or the edges).
std::vector<int64_t> shown_indices(int64_t n, bool summarize) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i >= kEdgeItems && i < n - kEdgeItems) continue;
    out.push_back(i);
  }
  return out;
}

// Flat indices of every printed element (PyTorch's get_summarized_data).
void collect_shown(const Shape& sizes, int dim, int64_t offset, bool summarize,
                   std::vector<int64_t>& out) {
  if (dim == sizes.size()) {
    out.push_back(offset);
    return;
  }
  const int64_t stride = row_stride(sizes, dim);
  for (int64_t i : shown_indices(sizes[dim], summarize)) {
    collect_shown(sizes, dim + 1, offset + i * stride, summarize, out);
  }
}

// One dimension's values, "..." in the middle when summarised, wrapped at kLineWidth.
std::string vector_str(const HostValues& v, const Formatter& f, int64_t offset, int indent,
                       bool summarize) {
  const int64_t n = v.sizes.back();
  std::vector<std::string> items;
  for (int64_t i : shown_indices(n, summarize)) {
    if (summarize && n > 2 * kEdgeItems && i == n - kEdgeItems) items.emplace_back(" ...");
    items.push_back(f.format(offset + i));
  }
  const size_t per_line = static_cast<size_t>(std::max(1, (kLineWidth - indent) / (f.width() + 2)));
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0 && i % per_line == 0) {
      out += ",\n";
      out.append(static_cast<size_t>(indent) + 1, ' ');
    } else if (i > 0) {
      out += ", ";
    }
    out += items[i];
  }
  return out + "]";
}

// The nested brackets of dimensions dim.. (PyTorch's _tensor_str_with_formatter).
std::string tensor_str(const HostValues& v, const Formatter& f, int dim, int64_t offset, int indent,
                       bool summarize) {
  if (dim == v.sizes.size() - 1) return vector_str(v, f, offset, indent, summarize);
  const int64_t n = v.sizes[dim];
  const int64_t stride = row_stride(v.sizes, dim);
  const int rest = v.sizes.size() - dim;  // dimensions from here on, this one included
  std::string sep = ",";
  sep.append(static_cast<size_t>(rest - 1), '\n');
  sep.append(static_cast<size_t>(indent) + 1, ' ');
  std::string out = "[";
  bool first = true;
  for (int64_t i : shown_indices(n, summarize)) {
    if (!first) out += sep;
    if (summarize && n > 2 * kEdgeItems && i == n - kEdgeItems) {
      out += "...";
      out += sep;
    }
    first = false;
    out += tensor_str(v, f, dim + 1, offset + i * stride, indent + 1, summarize);
  }
  return out + "]";
}

HostValues host_values(const Tensor& t) {
  HostValues v;
  v.sizes = t.sizes();
  v.dtype = t.dtype();
  if (is_floating(t.dtype())) {
    v.floats = t.to_vector<double>();
  } else {
    v.ints = t.to_vector<int64_t>();
  }
  return v;
}

// "(0, 3)": PyTorch prints the size suffix as a Python tuple.
std::string size_tuple(const Shape& sizes) {
  std::string out = "(";
  for (int d = 0; d < sizes.size(); ++d) out += (d > 0 ? ", " : "") + std::to_string(sizes[d]);
  return out + (sizes.size() == 1 ? ",)" : ")");
}

// PyTorch's _add_suffixes: ", suffix", or a new line when the line would pass kLineWidth.
std::string with_suffixes(const std::string& body, const std::vector<std::string>& suffixes) {
  std::string out = body;
  const size_t newline = body.rfind('\n');
  // Python: len(s) - s.rfind("\n") + 1, where rfind gives -1 when there is no newline.
  int64_t line_len = static_cast<int64_t>(body.size()) -
                     (newline == std::string::npos ? -1 : static_cast<int64_t>(newline)) + 1;
  for (const std::string& suffix : suffixes) {
    const int64_t len = static_cast<int64_t>(suffix.size());
    if (line_len + len + 2 > kLineWidth) {
      out += ",\n" + std::string(static_cast<size_t>(kIndent), ' ') + suffix;
      line_len = kIndent + len;
    } else {
      out += ", " + suffix;
      line_len += len + 2;
    }
  }
  return out + ")";
}

}  // namespace

std::string to_string(const Tensor& t) {
  if (!t.defined()) return "tensor(undefined)";
  std::vector<std::string> suffixes;
  if (!t.device().is_cpu()) suffixes.push_back(fmt::format("device='{}'", t.device().str()));
  std::string body = "tensor(";
  if (t.device().is_meta()) {
    // No values to show: PyTorch's tensor(..., device='meta', size=(2, 3)).
    suffixes.push_back("size=" + size_tuple(t.sizes()));
    if (t.dtype() != kFloat32) suffixes.push_back(fmt::format("dtype={}", dtype_name(t.dtype())));
    body += "...";
  } else if (t.numel() == 0) {
    // No element to tell int64 from float32, so only float32 goes without a dtype.
    if (t.dim() != 1) suffixes.push_back("size=" + size_tuple(t.sizes()));
    if (t.dtype() != kFloat32) suffixes.push_back(fmt::format("dtype={}", dtype_name(t.dtype())));
    body += "[]";
  } else {
    if (t.dtype() != kFloat32 && t.dtype() != kInt64 && t.dtype() != kBool) {
      suffixes.push_back(fmt::format("dtype={}", dtype_name(t.dtype())));
    }
    const HostValues v = host_values(t);
    const bool summarize = t.numel() > kSummarizeAbove;
    std::vector<int64_t> shown;
    collect_shown(v.sizes, 0, 0, summarize, shown);
    const Formatter f(v, shown);
    body += t.dim() == 0 ? f.format(0) : tensor_str(v, f, 0, 0, kIndent, summarize);
  }
  const std::string grad_fn = t.grad_fn_name();
  if (!grad_fn.empty()) {
    suffixes.push_back(fmt::format("grad_fn=<{}>", grad_fn));
  } else if (t.requires_grad()) {
    suffixes.push_back("requires_grad=True");
  }
  return with_suffixes(body, suffixes);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace memgrad
