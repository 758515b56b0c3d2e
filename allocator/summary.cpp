// The memory_summary() table, 75 characters between the bars, as in PyTorch.
#include "allocator/summary.h"

#include <array>
#include <vector>

#include <fmt/format.h>

namespace memgrad {
namespace {

constexpr size_t kWidth = 75;

std::string pad(std::string line) {
  line.resize(kWidth, ' ');
  return line;
}

// "  1234 KiB": the unit is chosen from `reference` (the row's "all" value), as PyTorch does.
std::string format_bytes(int64_t value, int64_t reference) {
  static constexpr std::array<const char*, 6> kUnits = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
  size_t unit = 0;
  double ref = static_cast<double>(reference);
  while (unit + 1 < kUnits.size() && ref >= 768 * 1024) {
    ++unit;
    value /= 1024;
    ref /= 1024;
  }
  return fmt::format("{:6d} {}", value, kUnits[unit]);
}

std::string format_count(int64_t value, int64_t reference) {
  static constexpr std::array<const char*, 3> kUnits = {" ", "K", "M"};
  size_t unit = 0;
  double ref = static_cast<double>(reference);
  while (unit + 1 < kUnits.size() && ref >= 750 * 1000) {
    ++unit;
    value /= 1000;
    ref /= 1000;
  }
  return fmt::format("{:7d} {} ", value, kUnits[unit]);
}

using Formatter = std::string (*)(int64_t, int64_t);

std::string row(std::string_view name, const Stat& s, const Stat& reference, Formatter f) {
  return fmt::format(" {:<21} | {} | {} | {} | {} ", name, f(s.current, reference.current),
                     f(s.peak, reference.peak), f(s.allocated, reference.allocated),
                     f(s.freed, reference.freed));
}

// The fragmentation rows: where reserved - allocated is now, one current value each.
void add_fragmentation_rows(std::vector<std::string>& lines, const FragmentationReport& f) {
  const auto reference = static_cast<int64_t>(f.reserved);
  const auto value_row = [&](const char* name, size_t value, const char* what) {
    lines.push_back(pad(fmt::format(" {:<21} | {} | {}", name,
                                    format_bytes(static_cast<int64_t>(value), reference), what)));
  };
  lines.push_back(std::string(kWidth, '='));
  lines.push_back(pad(" Reserved but unallocated = hard + soft + other streams, now:"));
  lines.push_back(std::string(kWidth, '-'));
  value_row("Hard fragmentation", f.hard, "fenced by live blocks");
  value_row("Soft fragmentation", f.soft, "in wholly free segments");
  value_row("Other streams", f.stream, "held for other streams");
  value_row("Rounding", f.rounding, "allocated - requested");
  value_row("Largest free block", f.largest_free_block, "the largest cached request");
}

}  // namespace

std::string memory_summary(const MemoryStats& stats, std::string_view device,
                           std::string_view policy, bool abbreviated,
                           const FragmentationReport* fragmentation) {
  struct Metric {
    const PooledStat* stat;
    const char* name;
    Formatter format;
  };
  const std::vector<Metric> metrics = {
      {&stats.allocated_bytes, "Allocated memory", format_bytes},
      {&stats.active_bytes, "Active memory", format_bytes},
      {&stats.requested_bytes, "Requested memory", format_bytes},
      {&stats.reserved_bytes, "Reserved memory", format_bytes},
      {&stats.inactive_split_bytes, "Non-releasable memory", format_bytes},
      {&stats.allocation, "Allocations", format_count},
      {&stats.active, "Active allocs", format_count},
      {&stats.segment, "Reserved segments", format_count},
      {&stats.inactive_split, "Non-releasable allocs", format_count},
  };
  const std::string rule_eq(kWidth, '=');
  const std::string rule_dash(kWidth, '-');
  std::vector<std::string> lines;
  lines.push_back(rule_eq);
  lines.push_back(
      pad(fmt::format(" {:16} memgrad memory summary, device {} ({})", "", device, policy)));
  lines.push_back(rule_dash);
  lines.push_back(pad(fmt::format("  {:9} OOMs: {:<16d} | {:6} source alloc retries: {:<8d}", "",
                                  stats.num_ooms, "", stats.num_alloc_retries)));
  lines.push_back(rule_eq);
  lines.push_back(
      pad("        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  "));
  for (const Metric& m : metrics) {
    lines.push_back(rule_dash);
    lines.push_back(row(m.name, m.stat->all(), m.stat->all(), m.format));
    if (!abbreviated) {
      lines.push_back(row("      from large pool", m.stat->large_pool(), m.stat->all(), m.format));
      lines.push_back(row("      from small pool", m.stat->small_pool(), m.stat->all(), m.format));
    }
  }
  lines.push_back(rule_dash);
  lines.push_back(row("Oversize allocations", stats.oversize_allocations,
                      stats.oversize_allocations, format_count));
  lines.push_back(rule_dash);
  lines.push_back(
      row("Oversize segments", stats.oversize_segments, stats.oversize_segments, format_count));
  if (fragmentation != nullptr) add_fragmentation_rows(lines, *fragmentation);
  lines.push_back(rule_eq);
  std::string out;
  for (const std::string& line : lines) out += "|" + line + "|\n";
  return out;
}

}  // namespace memgrad
