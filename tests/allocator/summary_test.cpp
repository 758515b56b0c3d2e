// memory_summary(): PyTorch's table layout, row order and unit rules, checked on exact strings.
//
// Units follow torch.cuda.memory_summary(): a byte column steps from B to KiB once the "all"
// row's value in that column reaches 768 KiB, to MiB at 768 MiB, and so on, dividing with
// integer floor; counts step to K and M at 750,000. Rows of one metric share the "all" row's
// unit, so a pool row can read "0 KiB".
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "allocator/bounded_memory.h"
#include "allocator/caching_allocator.h"
#include "allocator/error.h"
#include "allocator/summary.h"

using namespace memgrad;

namespace {

std::vector<std::string> lines_of(const std::string& table) {
  std::vector<std::string> lines;
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The first line whose text after the opening bar starts with " " + `name` + " ". Pool rows
// ("      from large pool") repeat under every metric: this finds Allocated memory's.
std::string row(const std::string& table, const std::string& name) {
  for (const std::string& line : lines_of(table)) {
    if (line.rfind("| " + name + " ", 0) == 0) return line;
  }
  return "(no row '" + name + "')";
}

// The first column of every data row (after the header), trimmed, in order.
std::vector<std::string> row_names(const std::string& table) {
  std::vector<std::string> names;
  bool past_header = false;
  for (const std::string& line : lines_of(table)) {
    if (line.find("Metric") != std::string::npos) {
      past_header = true;
      continue;
    }
    if (!past_header || line[1] == '-' || line[1] == '=') continue;
    const std::string first = line.substr(1, line.find('|', 1) - 1);
    names.push_back(first.substr(first.find_first_not_of(' '),
                                 first.find_last_not_of(' ') - first.find_first_not_of(' ') + 1));
  }
  return names;
}

// Stats with one byte metric and one count metric set in the large pool.
MemoryStats stats_with(int64_t reserved_bytes, int64_t allocations) {
  MemoryStats s;
  s.reserved_bytes.increase(StatPool::LargePool, reserved_bytes);
  s.allocation.increase(StatPool::LargePool, allocations);
  return s;
}

// After a 4000 B block (4096 in a 2 MiB small segment) and a 5 MiB block (in a 20 MiB large
// segment) were allocated and the 4000 B one freed again.
std::string table_after_known_allocations(bool abbreviated) {
  BoundedMemory memory(1024 * kMiB, "sim:0");
  CachingAllocator alloc(memory);
  const Block small = alloc.allocate(4000);
  const Block large = alloc.allocate(5 * kMiB);
  alloc.free(small);
  std::string table =
      memory_summary(alloc.stats(), memory.name(), alloc.policy_name(), abbreviated);
  alloc.free(large);
  return table;
}

}  // namespace

TEST_SUITE("allocator") {

TEST_CASE("every summary line is 77 characters: a bar, 75 characters, a bar") {
  for (bool abbreviated : {false, true}) {
    CAPTURE(abbreviated);
    for (const std::string& line : lines_of(table_after_known_allocations(abbreviated))) {
      CAPTURE(line);
      CHECK_EQ(line.size(), 77);
      CHECK_EQ(line.front(), '|');
      CHECK_EQ(line.back(), '|');
    }
  }
  const MemoryStats huge = stats_with(int64_t{1} << 62, int64_t{1} << 40);
  for (const std::string& line : lines_of(
           memory_summary(huge, "a-very-long-device-name:12345", "a-long-policy-name", false))) {
    CAPTURE(line);
    CHECK_EQ(line.size(), 77);
  }
}

TEST_CASE("the summary starts with PyTorch's header rows") {
  BoundedMemory memory(4 * kMiB, "sim:0");
  CachingAllocator alloc(memory);
  CHECK_THROWS_AS(alloc.allocate(8 * kMiB), OutOfMemoryError);
  const std::vector<std::string> lines =
      lines_of(memory_summary(alloc.stats(), "sim:0", "caching"));
  REQUIRE_GE(lines.size(), 6);
  const std::string equals = "|" + std::string(75, '=') + "|";
  const std::string dashes = "|" + std::string(75, '-') + "|";
  CHECK_EQ(lines[0], equals);
  CHECK_EQ(lines[1],
           "|                  memgrad memory summary, device sim:0 (caching)           |");
  CHECK_EQ(lines[2], dashes);
  CHECK_EQ(lines[3],
           "|            OOMs: 1                |        source alloc retries: 1        |");
  CHECK_EQ(lines[4], equals);
  CHECK_EQ(lines[5],
           "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |");
  CHECK_EQ(lines[6], dashes);
  CHECK_EQ(lines.back(), equals);
}

TEST_CASE("summary rows come in PyTorch's order, each metric with its pool rows") {
  const std::string pools[] = {"from large pool", "from small pool"};
  const std::string metrics[] = {
      "Allocated memory", "Active memory",         "Requested memory",
      "Reserved memory",  "Non-releasable memory", "Allocations",
      "Active allocs",    "Reserved segments",     "Non-releasable allocs"};
  std::vector<std::string> full;
  std::vector<std::string> abbreviated;
  for (const std::string& m : metrics) {
    full.push_back(m);
    full.insert(full.end(), std::begin(pools), std::end(pools));
    abbreviated.push_back(m);
  }
  for (const char* single : {"Oversize allocations", "Oversize segments"}) {
    full.emplace_back(single);
    abbreviated.emplace_back(single);
  }
  CHECK(row_names(table_after_known_allocations(false)) == full);
  CHECK(row_names(table_after_known_allocations(true)) == abbreviated);
  // 6 header lines, a rule before each of the 9 metrics and 2 single rows, the closing rule.
  CHECK_EQ(lines_of(table_after_known_allocations(false)).size(), 6 + 9 * 4 + 2 * 2 + 1);
  CHECK_EQ(lines_of(table_after_known_allocations(true)).size(), 6 + 9 * 2 + 2 * 2 + 1);
}

TEST_CASE("summary rows after known allocations show exact values and units") {
  const std::string t = table_after_known_allocations(false);
  // allocated: current 5 MiB = 5120 KiB; peak and total 5 MiB + 4096 B = 5124 KiB; freed 4096 B
  // (the freed column's "all" value is below 768 KiB, so it stays in bytes).
  CHECK_EQ(row(t, "Allocated memory"),
           "| Allocated memory      |   5120 KiB |   5124 KiB |   5124 KiB |   4096 B   |");
  CHECK_EQ(row(t, "      from large pool"),
           "|       from large pool |   5120 KiB |   5120 KiB |   5120 KiB |      0 B   |");
  CHECK_EQ(row(t, "      from small pool"),
           "|       from small pool |      0 KiB |      4 KiB |      4 KiB |   4096 B   |");
  // requested: peak 5 MiB + 4000 B = 5246880 B, floor(5246880 / 1024) = 5123 KiB.
  CHECK_EQ(row(t, "Requested memory"),
           "| Requested memory      |   5120 KiB |   5123 KiB |   5123 KiB |   4000 B   |");
  // reserved: a 2 MiB and a 20 MiB segment, none released.
  CHECK_EQ(row(t, "Reserved memory"),
           "| Reserved memory       |  22528 KiB |  22528 KiB |  22528 KiB |      0 B   |");
  // non-releasable: the 15 MiB tail of the large segment; the peak adds the small segment's
  // 2 MiB - 4096 B tail (17404 KiB), which merged away when the 4000 B block was freed.
  CHECK_EQ(row(t, "Non-releasable memory"),
           "| Non-releasable memory |  15360 KiB |  17404 KiB |  17404 KiB |   2044 KiB |");
  CHECK_EQ(row(t, "Allocations"),
           "| Allocations           |       1    |       2    |       2    |       1    |");
  CHECK_EQ(row(t, "Reserved segments"),
           "| Reserved segments     |       2    |       2    |       2    |       0    |");
}

TEST_CASE("a byte column shows KiB from 768 KiB and MiB from 768 MiB") {
  CHECK_EQ(row(memory_summary(stats_with(786431, 1), "cpu", "caching"), "Reserved memory"),
           "| Reserved memory       | 786431 B   | 786431 B   | 786431 B   |      0 B   |");
  CHECK_EQ(row(memory_summary(stats_with(786432, 1), "cpu", "caching"), "Reserved memory"),
           "| Reserved memory       |    768 KiB |    768 KiB |    768 KiB |      0 B   |");
  CHECK_EQ(row(memory_summary(stats_with(2 * kMiB, 1), "cpu", "caching"), "Reserved memory"),
           "| Reserved memory       |   2048 KiB |   2048 KiB |   2048 KiB |      0 B   |");
  // 768 MiB - 1 B: floor division gives 786431 KiB, still below 768 KiB-units of MiB.
  CHECK_EQ(row(memory_summary(stats_with(768 * kMiB - 1, 1), "cpu", "caching"), "Reserved memory"),
           "| Reserved memory       | 786431 KiB | 786431 KiB | 786431 KiB |      0 B   |");
  CHECK_EQ(row(memory_summary(stats_with(768 * kMiB, 1), "cpu", "caching"), "Reserved memory"),
           "| Reserved memory       |    768 MiB |    768 MiB |    768 MiB |      0 B   |");
  CHECK_EQ(
      row(memory_summary(stats_with(int64_t{3} << 40, 1), "cpu", "caching"), "Reserved memory"),
      "| Reserved memory       |   3072 GiB |   3072 GiB |   3072 GiB |      0 B   |");
}

TEST_CASE("pool rows use the unit of their metric's all row") {
  MemoryStats s;
  s.allocated_bytes.increase(StatPool::LargePool, kMiB);
  s.allocated_bytes.increase(StatPool::SmallPool, 1000);
  const std::string t = memory_summary(s, "cpu", "caching");
  // all = 1 MiB + 1000 B = 1024 KiB after floor division; the small pool's 1000 B reads 0 KiB.
  CHECK_EQ(row(t, "Allocated memory"),
           "| Allocated memory      |   1024 KiB |   1024 KiB |   1024 KiB |      0 B   |");
  CHECK_EQ(row(t, "      from small pool"),
           "|       from small pool |      0 KiB |      0 KiB |      0 KiB |      0 B   |");
}

TEST_CASE("a count column shows K from 750,000 and M from 750,000,000") {
  CHECK_EQ(row(memory_summary(stats_with(0, 749999), "cpu", "caching"), "Allocations"),
           "| Allocations           |  749999    |  749999    |  749999    |       0    |");
  CHECK_EQ(row(memory_summary(stats_with(0, 750000), "cpu", "caching"), "Allocations"),
           "| Allocations           |     750 K  |     750 K  |     750 K  |       0    |");
  CHECK_EQ(row(memory_summary(stats_with(0, 1'234'567'890), "cpu", "caching"), "Allocations"),
           "| Allocations           |    1234 M  |    1234 M  |    1234 M  |       0    |");
}

}  // TEST_SUITE("allocator")
