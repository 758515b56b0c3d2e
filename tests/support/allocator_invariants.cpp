// Snapshot invariants: a walk over segments and blocks that reports the first thing out of place.
#include "tests/support/allocator_invariants.h"

#include <fmt/format.h>

#include "allocator/config.h"
#include "lab/policy_registry.h"

namespace memgrad::testing {
namespace {

constexpr size_t kGranule = 512;

std::string check_segment(const SegmentSnapshot& seg, SnapshotTotals& totals,
                          const LayoutRules& rules) {
  if (seg.blocks.empty()) return fmt::format("segment at {} has no blocks", seg.address);
  if (seg.blocks.front().address != seg.address) {
    return fmt::format("segment at {} starts with a block at {}", seg.address,
                       seg.blocks.front().address);
  }
  // Free blocks count as inactive split blocks while the segment also holds an allocated one
  // (a segment with nothing allocated can be released whole).
  bool in_use = false;
  for (const BlockSnapshot& b : seg.blocks) in_use = in_use || b.allocated;
  size_t tiled = 0;
  for (size_t i = 0; i < seg.blocks.size(); ++i) {
    const BlockSnapshot& b = seg.blocks[i];
    if (b.nbytes == 0 || b.nbytes % kGranule != 0) {
      return fmt::format("block at {} has size {} (not a positive multiple of 512)", b.address,
                         b.nbytes);
    }
    if (b.address != seg.address + tiled) {
      return fmt::format("block at {} in segment at {} should start at {} (gap or overlap)",
                         b.address, seg.address, seg.address + tiled);
    }
    tiled += b.nbytes;
    if (rules.coalesced && i + 1 < seg.blocks.size() && !b.allocated &&
        !seg.blocks[i + 1].allocated) {
      return fmt::format("free blocks at {} and {} are neighbours (not coalesced)", b.address,
                         seg.blocks[i + 1].address);
    }
    if (b.allocated) {
      if (b.requested == 0 || b.requested > b.nbytes) {
        return fmt::format("allocated block at {} of {} bytes reports requested {}", b.address,
                           b.nbytes, b.requested);
      }
      ++totals.allocated_blocks;
      totals.allocated += b.nbytes;
      totals.requested += b.requested;
    } else if (in_use) {
      ++totals.inactive_split;
      totals.inactive_split_bytes += b.nbytes;
    }
  }
  if (tiled != seg.nbytes) {
    return fmt::format("blocks of segment at {} sum to {} bytes, the segment has {}", seg.address,
                       tiled, seg.nbytes);
  }
  ++totals.segments;
  totals.reserved += seg.nbytes;
  (seg.small_pool ? totals.reserved_small : totals.reserved_large) += seg.nbytes;
  return {};
}

std::string compare(const char* what, size_t from_snapshot, int64_t from_stats) {
  if (static_cast<int64_t>(from_snapshot) == from_stats) return {};
  return fmt::format("{}: snapshot says {}, stats say {}", what, from_snapshot, from_stats);
}

}  // namespace

LayoutRules layout_rules_for(std::string_view policy) {
  const PolicyEntry* entry = find_policy(policy);
  return entry != nullptr ? entry->layout : LayoutRules{};
}

std::string check_snapshot_layout(const std::vector<SegmentSnapshot>& segments,
                                  SnapshotTotals& totals, const LayoutRules& rules) {
  for (size_t i = 0; i < segments.size(); ++i) {
    if (i > 0 && segments[i - 1].address + segments[i - 1].nbytes > segments[i].address) {
      return fmt::format("segments at {} ({} bytes) and {} overlap or are out of order",
                         segments[i - 1].address, segments[i - 1].nbytes, segments[i].address);
    }
    std::string problem = check_segment(segments[i], totals, rules);
    if (!problem.empty()) return problem;
  }
  return {};
}

std::string check_totals_match_stats(const SnapshotTotals& t, const MemoryStats& s,
                                     const LayoutRules& rules) {
  const size_t split_blocks = rules.split_stats ? t.inactive_split : 0;
  const size_t split_bytes = rules.split_stats ? t.inactive_split_bytes : 0;
  const std::string problems[] = {
      compare("reserved bytes", t.reserved, s.reserved_bytes.all().current),
      compare("small-pool reserved bytes", t.reserved_small, s.reserved_bytes.small_pool().current),
      compare("large-pool reserved bytes", t.reserved_large, s.reserved_bytes.large_pool().current),
      compare("segments", t.segments, s.segment.all().current),
      compare("allocated bytes", t.allocated, s.allocated_bytes.all().current),
      compare("allocations", t.allocated_blocks, s.allocation.all().current),
      compare("requested bytes", t.requested, s.requested_bytes.all().current),
      compare("inactive split blocks", split_blocks, s.inactive_split.all().current),
      compare("inactive split bytes", split_bytes, s.inactive_split_bytes.all().current),
  };
  for (const std::string& p : problems) {
    if (!p.empty()) return p;
  }
  return {};
}

std::vector<std::string> known_policy_names() {
  std::vector<std::string> names;
  for (const PolicyEntry& entry : policy_table()) names.emplace_back(entry.name);
  return names;
}

std::string check_allocator(const PolicyAllocator& allocator, SnapshotTotals* totals) {
  SnapshotTotals local;
  SnapshotTotals& t = totals != nullptr ? *totals : local;
  const LayoutRules rules = layout_rules_for(allocator.policy_name());
  std::string problem = check_snapshot_layout(allocator.snapshot(), t, rules);
  if (!problem.empty()) return problem;
  return check_totals_match_stats(t, allocator.stats(), rules);
}

}  // namespace memgrad::testing
