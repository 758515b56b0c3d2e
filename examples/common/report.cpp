// MemoryReport formatting.
#include "examples/common/report.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace memgrad::examples {

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

std::string human_bytes(int64_t nbytes) {
  const double v = static_cast<double>(nbytes < 0 ? -nbytes : nbytes);
  const char* sign = nbytes < 0 ? "-" : "";
  if (v < 1024) return fmt::format("{}{} B", sign, static_cast<int64_t>(v));
  if (v < 1024.0 * 1024) return fmt::format("{}{:.2f} KiB", sign, v / 1024);
  if (v < 1024.0 * 1024 * 1024) return fmt::format("{}{:.2f} MiB", sign, v / 1024 / 1024);
  return fmt::format("{}{:.2f} GiB", sign, v / 1024 / 1024 / 1024);
}

int64_t rounded(int64_t nbytes) { return nbytes <= 0 ? 0 : (nbytes + 511) / 512 * 512; }

MemoryReport::MemoryReport(std::string title) : title_(std::move(title)) {}

void MemoryReport::add(std::string what, int64_t expected, int64_t measured, int64_t tolerance) {
  rows_.push_back({std::move(what), expected, measured, tolerance, true});
}

void MemoryReport::note(std::string what, int64_t measured) {
  rows_.push_back({std::move(what), 0, measured, 0, false});
}

bool MemoryReport::all_match() const {
  for (const Row& r : rows_) {
    if (r.has_expectation && std::llabs(r.expected - r.measured) > r.tolerance) return false;
  }
  return true;
}

std::string MemoryReport::str() const {
  size_t width = 5;
  for (const Row& r : rows_) width = std::max(width, r.what.size());
  std::string out = title_ + "\n";
  out += fmt::format("  {:<{}}  {:>15}  {:>15}  {}\n", "", width, "expected", "measured", "match");
  for (const Row& r : rows_) {
    const std::string measured = with_commas(r.measured) + " B";
    if (!r.has_expectation) {
      out += fmt::format("  {:<{}}  {:>15}  {:>15}  {:5}  ({})\n", r.what, width, "-", measured, "",
                         human_bytes(r.measured));
      continue;
    }
    const bool ok = std::llabs(r.expected - r.measured) <= r.tolerance;
    out += fmt::format("  {:<{}}  {:>15}  {:>15}  {:5}  ({})\n", r.what, width,
                       with_commas(r.expected) + " B", measured, ok ? "yes" : "NO",
                       human_bytes(r.measured));
  }
  return out;
}

void MemoryReport::print() const { std::fputs(str().c_str(), stdout); }

}  // namespace memgrad::examples
