// The fixed layout sequence and the snapshot-to-SVG drawing.
#include "lab/cli/lab_layout.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "allocator/config.h"

namespace memgrad::lab {
namespace {

// Geometry in SVG user units (pixels).
constexpr double kLeft = 150.0;      // segment labels go left of this
constexpr double kRowWidth = 800.0;  // one row = kRowBytes
constexpr size_t kRowBytes = 4 * kMiB;
constexpr double kRowHeight = 22.0;
constexpr double kRowGap = 6.0;
constexpr double kSegmentGap = 16.0;
constexpr double kTop = 78.0;

// The sequence: (bytes to allocate, or 0 = free the block allocated at step `free_index`).
struct Step {
  size_t nbytes;
  int free_index;
};
const std::vector<Step> kSequence = {
    {1536 * kKiB, -1},
    {200 * kKiB, -1},
    {1536 * kKiB, -1},
    {600 * kKiB, -1},
    {50 * kKiB, -1},
    {3 * kMiB, -1},
    {300 * kKiB, -1},
    {5 * kMiB, -1},
    {0, 1},
    {0, 4},
    {0, 6},
    {0, 2},
    {100 * kKiB, -1},
    {2200 * kKiB, -1},
    {700 * kKiB, -1},
};

std::string size_text(uint64_t nbytes) {
  if (nbytes >= kMiB) return fmt::format("{:.2f} MiB", static_cast<double>(nbytes) / kMiB);
  if (nbytes >= kKiB) return fmt::format("{:.1f} KiB", static_cast<double>(nbytes) / kKiB);
  return fmt::format("{} B", nbytes);
}

double x_of(uint64_t offset_in_row) {
  return kLeft + kRowWidth * static_cast<double>(offset_in_row) / static_cast<double>(kRowBytes);
}

// Draws [from, to) of a segment (offsets within it) across its rows, with `style`.
void draw_span(std::string& svg, double top, uint64_t from, uint64_t to, const char* style) {
  while (from < to) {
    const uint64_t row = from / kRowBytes;
    const uint64_t row_end = std::min<uint64_t>(to, (row + 1) * kRowBytes);
    const double y = top + static_cast<double>(row) * (kRowHeight + kRowGap);
    const double x0 = x_of(from - row * kRowBytes);
    const double x1 = x_of(row_end - row * kRowBytes);
    svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" {}/>\n",
                       x0, y, std::max(x1 - x0, 0.6), kRowHeight, style);
    from = row_end;
  }
}

size_t rows_of(const SegmentSnapshot& seg) { return (seg.nbytes + kRowBytes - 1) / kRowBytes; }

}  // namespace

std::vector<SegmentSnapshot> run_layout_sequence(PolicyAllocator& allocator) {
  std::vector<Block> blocks;
  for (const Step& s : kSequence) {
    if (s.nbytes > 0) {
      blocks.push_back(allocator.allocate(s.nbytes));
    } else {
      allocator.free(blocks[static_cast<size_t>(s.free_index)]);
      blocks[static_cast<size_t>(s.free_index)] = Block{};
      blocks.push_back(Block{});
    }
  }
  std::vector<SegmentSnapshot> snapshot = allocator.snapshot();
  for (const Block& b : blocks) allocator.free(b);
  return snapshot;
}

RecordedStep layout_sequence_step() {
  RecordedStep step;
  uint64_t index = 0;
  for (const Step& s : kSequence) {
    if (s.nbytes > 0) {
      step.push_back({true, index, s.nbytes});
    } else {
      step.push_back({false, static_cast<uint64_t>(s.free_index), 0});
    }
    ++index;
  }
  return step;
}

std::string layout_sequence_text() {
  std::string out;
  int index = 0;
  for (const Step& s : kSequence) {
    if (s.nbytes > 0) {
      out += fmt::format("{}b{} = {}", out.empty() ? "" : ", ", index, size_text(s.nbytes));
    } else {
      out += fmt::format(", free b{}", s.free_index);
    }
    ++index;
  }
  return out;
}

std::string snapshot_to_svg(const std::vector<SegmentSnapshot>& segments, std::string_view title) {
  size_t reserved = 0, allocated = 0, requested = 0, rows = 0;
  for (const SegmentSnapshot& seg : segments) {
    reserved += seg.nbytes;
    rows += rows_of(seg);
    for (const BlockSnapshot& b : seg.blocks) {
      if (!b.allocated) continue;
      allocated += b.nbytes;
      requested += b.requested;
    }
  }
  const double height = kTop + static_cast<double>(rows) * (kRowHeight + kRowGap) +
                        static_cast<double>(segments.size()) * kSegmentGap + 20.0;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{}</text>\n"
      "<text x=\"10\" y=\"38\">{} segment(s), reserved {}, allocated {}, requested {} "
      "(one row = {})</text>\n",
      kLeft + kRowWidth + 20.0, height, title, segments.size(), size_text(reserved),
      size_text(allocated), size_text(requested), size_text(kRowBytes));
  // Legend.
  svg += fmt::format(
      "<rect x=\"10\" y=\"48\" width=\"14\" height=\"10\" fill=\"#3d6fb6\"/>"
      "<text x=\"28\" y=\"57\">requested bytes</text>\n"
      "<rect x=\"130\" y=\"48\" width=\"14\" height=\"10\" fill=\"#a9c4ea\"/>"
      "<text x=\"148\" y=\"57\">rounding inside a block</text>\n"
      "<rect x=\"290\" y=\"48\" width=\"14\" height=\"10\" fill=\"#f4f4f4\" stroke=\"#999\"/>"
      "<text x=\"308\" y=\"57\">free (cached)</text>\n");
  double top = kTop;
  for (const SegmentSnapshot& seg : segments) {
    svg += fmt::format("<text x=\"10\" y=\"{:.1f}\">{} {}</text>\n", top + 15.0,
                       seg.small_pool ? "small" : "large", size_text(seg.nbytes));
    svg += fmt::format("<text x=\"10\" y=\"{:.1f}\" fill=\"#666\">at {:#x}</text>\n", top + 28.0,
                       seg.address);
    for (const BlockSnapshot& b : seg.blocks) {
      const uint64_t from = b.address - seg.address;
      if (!b.allocated) {
        draw_span(svg, top, from, from + b.nbytes,
                  "fill=\"#f4f4f4\" stroke=\"#999\" stroke-width=\"0.5\"");
        continue;
      }
      draw_span(svg, top, from, from + b.requested, "fill=\"#3d6fb6\"");
      draw_span(svg, top, from + b.requested, from + b.nbytes, "fill=\"#a9c4ea\"");
      draw_span(svg, top, from, from + b.nbytes,
                "fill=\"none\" stroke=\"#1d3f76\" stroke-width=\"0.6\"");
    }
    top += static_cast<double>(rows_of(seg)) * (kRowHeight + kRowGap) + kSegmentGap;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace memgrad::lab
