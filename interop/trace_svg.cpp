// trace_to_svg: a recorded allocator trace drawn as a self-contained SVG timeline.
//
// Layout (top to bottom): the title; the plot, with one shaded band per run of events in the
// same phase (labelled when the band is wide enough), the reserved and allocated bytes as step
// lines, the peak marked, byte ticks on the left and time ticks below; then the legend: the two
// lines, the phase colours, and the largest blocks alive at the peak with the op, phase and label
// that allocated them. Everything is computed from the events alone, so the same trace always
// gives the same picture.
#include "allocator/trace.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace memgrad {
namespace {

// Geometry in SVG user units (pixels).
constexpr double kWidth = 960.0;
constexpr double kPlotLeft = 96.0;
constexpr double kPlotRight = 940.0;
constexpr double kPlotTop = 72.0;
constexpr double kPlotBottom = 352.0;
constexpr double kLegendTop = kPlotBottom + 56.0;
constexpr double kLineHeight = 18.0;
constexpr double kCharWidth = 6.6;   // average width of an 11px sans-serif character
constexpr size_t kLegendBlocks = 8;  // largest live blocks listed
constexpr int kTargetTicks = 5;      // ticks per axis, roughly

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiBytes = 1024 * kKiB;
constexpr int64_t kGiBytes = 1024 * kMiBytes;

const std::array<const char*, 8> kPhaseColours = {"#cfe2f3", "#fce5cd", "#d9ead3", "#ead1dc",
                                                  "#fff2cc", "#d0e0e3", "#e6e6e6", "#f4cccc"};

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

// "1.50 MiB", "512 B": binary units, two decimals above 1 KiB.
std::string byte_text(int64_t nbytes) {
  const double v = static_cast<double>(nbytes);
  if (nbytes < kKiB) return fmt::format("{} B", nbytes);
  if (nbytes < kMiBytes) return fmt::format("{:.2f} KiB", v / kKiB);
  if (nbytes < kGiBytes) return fmt::format("{:.2f} MiB", v / kMiBytes);
  return fmt::format("{:.2f} GiB", v / kGiBytes);
}

// A tick step: the smallest "nice" multiple of a unit (1, 2, 5, 10, ... x unit) >= raw.
struct Step {
  int64_t value;  // step in the axis' base unit (bytes or nanoseconds)
  int64_t unit;   // the unit its labels are written in
  const char* unit_name;
};

Step byte_step(int64_t raw) {
  const std::array<std::pair<int64_t, const char*>, 4> units = {
      {{1, "B"}, {kKiB, "KiB"}, {kMiBytes, "MiB"}, {kGiBytes, "GiB"}}};
  const std::array<int64_t, 9> multiples = {1, 2, 5, 10, 20, 50, 100, 200, 500};
  for (const auto& [unit, name] : units) {
    for (int64_t m : multiples) {
      if (m * unit >= raw) return {m * unit, unit, name};
    }
  }
  const int64_t m = (raw + kGiBytes - 1) / kGiBytes;
  return {m * kGiBytes, kGiBytes, "GiB"};
}

Step time_step(int64_t raw_ns) {
  int64_t decade = 1;
  while (true) {
    for (int64_t m : {1, 2, 5}) {
      if (m * decade >= raw_ns) {
        const int64_t step = m * decade;
        if (step >= 1'000'000'000) return {step, 1'000'000'000, "s"};
        if (step >= 1'000'000) return {step, 1'000'000, "ms"};
        if (step >= 1'000) return {step, 1'000, "us"};
        return {step, 1, "ns"};
      }
    }
    decade *= 10;
  }
}

std::string tick_text(int64_t value, const Step& step) {
  if (value == 0) return "0";
  return fmt::format("{:g} {}", static_cast<double>(value) / static_cast<double>(step.unit),
                     step.unit_name);
}

// Maps times (ns) and bytes to plot coordinates.
// In doubles: a trace's times and byte counts may be anywhere in int64, where differences and
// headroom would overflow.
struct Scale {
  double t0 = 0.0, t1 = 1.0;
  double y_max = 1.0;
  double x(int64_t t) const {
    return kPlotLeft + (kPlotRight - kPlotLeft) * (static_cast<double>(t) - t0) / (t1 - t0);
  }
  double y(int64_t bytes) const {
    return kPlotBottom - (kPlotBottom - kPlotTop) * static_cast<double>(bytes) / y_max;
  }
};

// A run of consecutive events in the same (non-empty) phase.
struct Band {
  std::string phase;
  int64_t begin_ns, end_ns;
};

std::vector<Band> phase_bands(const std::vector<TraceEvent>& events,
                              const std::vector<TraceContextRecord>& contexts) {
  auto phase_of = [&](const TraceEvent& e) -> std::string {
    return e.context < contexts.size() ? contexts[e.context].phase : std::string();
  };
  std::vector<Band> bands;
  size_t begin = 0;
  for (size_t i = 1; i <= events.size(); ++i) {
    const std::string phase = phase_of(events[begin]);
    if (i < events.size() && phase_of(events[i]) == phase) continue;
    // A band lasts until the next run starts (the last one until the last event).
    const int64_t end = i < events.size() ? events[i].time_ns : events[i - 1].time_ns;
    if (!phase.empty()) bands.push_back({phase, events[begin].time_ns, end});
    begin = i;
  }
  return bands;
}

// Phase names in order of first appearance, each with its colour.
std::vector<std::pair<std::string, const char*>> phase_colours(const std::vector<Band>& bands) {
  std::vector<std::pair<std::string, const char*>> out;
  for (const Band& b : bands) {
    const bool known =
        std::any_of(out.begin(), out.end(), [&](const auto& p) { return p.first == b.phase; });
    if (!known) out.emplace_back(b.phase, kPhaseColours[out.size() % kPhaseColours.size()]);
  }
  return out;
}

const char* colour_of(const std::vector<std::pair<std::string, const char*>>& colours,
                      const std::string& phase) {
  for (const auto& [name, colour] : colours) {
    if (name == phase) return colour;
  }
  return kPhaseColours[0];
}

// A block alive at the peak.
struct LiveBlock {
  uint64_t address;
  uint64_t nbytes;
  uint32_t context;
};

// Replays allocs and frees up to the first event at the peak of allocated bytes.
std::vector<LiveBlock> live_at(const std::vector<TraceEvent>& events, size_t peak_index) {
  std::map<uint64_t, LiveBlock> live;
  for (size_t i = 0; i <= peak_index; ++i) {
    const TraceEvent& e = events[i];
    if (e.action == TraceAction::Alloc) live[e.address] = {e.address, e.nbytes, e.context};
    if (e.action == TraceAction::FreeRequested) live.erase(e.address);
  }
  std::vector<LiveBlock> out;
  for (const auto& [address, block] : live) {
    out.push_back(block);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const LiveBlock& a, const LiveBlock& b) { return a.nbytes > b.nbytes; });
  return out;
}

void draw_band(std::string& svg, const Band& b, double x0, double w,
               const std::vector<std::pair<std::string, const char*>>& colours) {
  svg += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
      "<title>{}</title></rect>\n",
      x0, kPlotTop, w, kPlotBottom - kPlotTop, colour_of(colours, b.phase), xml_escape(b.phase));
  if (w >= kCharWidth * static_cast<double>(b.phase.size()) + 6.0) {
    svg += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" class=\"phase\">{}</text>\n",
        x0 + w / 2, kPlotTop - 5.0, xml_escape(b.phase));
  }
}

// Bands narrower than a pixel are merged into the band drawn before them (which keeps its
// phase), so a trace of a million short phases draws at most one band per pixel column.
void draw_bands(std::string& svg, const std::vector<Band>& bands,
                const std::vector<std::pair<std::string, const char*>>& colours,
                const Scale& scale) {
  const Band* pending = nullptr;
  double pending_x0 = 0.0, pending_x1 = 0.0;
  for (const Band& b : bands) {
    const double x0 = scale.x(b.begin_ns), x1 = scale.x(b.end_ns);
    if (pending != nullptr && (x1 - x0 < 1.0 || pending->phase == b.phase) &&
        x0 <= pending_x1 + 1.0) {
      pending_x1 = std::max(pending_x1, x1);
      continue;
    }
    if (pending != nullptr) {
      draw_band(svg, *pending, pending_x0, std::max(1.0, pending_x1 - pending_x0), colours);
    }
    pending = &b;
    pending_x0 = x0;
    pending_x1 = x1;
  }
  if (pending != nullptr) {
    draw_band(svg, *pending, pending_x0, std::max(1.0, pending_x1 - pending_x0), colours);
  }
}

void draw_axes(std::string& svg, const Scale& scale) {
  // Trace readers keep times and bytes below 2^62, so these int64 steps cannot overflow.
  const Step ys = byte_step(static_cast<int64_t>(std::ceil(scale.y_max / kTargetTicks)));
  for (int64_t v = 0; static_cast<double>(v) <= scale.y_max; v += ys.value) {
    const double y = scale.y(v);
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/>\n"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
        kPlotLeft, y, kPlotRight, y, kPlotLeft - 6.0, y + 4.0, tick_text(v, ys));
  }
  const auto span = static_cast<int64_t>(scale.t1 - scale.t0);
  const Step ts = time_step(std::max<int64_t>(1, (span + kTargetTicks - 1) / kTargetTicks));
  for (int64_t t = 0; t <= span; t += ts.value) {
    const double x =
        kPlotLeft + (kPlotRight - kPlotLeft) * static_cast<double>(t) / (scale.t1 - scale.t0);
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"axis\"/>\n"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
        x, kPlotBottom, x, kPlotBottom + 5.0, x, kPlotBottom + 18.0, tick_text(t, ts));
  }
  svg += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" class=\"frame\"/>\n"
      "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">time since the trace "
      "started</text>\n",
      kPlotLeft, kPlotTop, kPlotRight - kPlotLeft, kPlotBottom - kPlotTop,
      (kPlotLeft + kPlotRight) / 2, kPlotBottom + 36.0);
}

// The step line of allocated (or reserved) bytes: each value holds until the next event. Events
// that fall in the same pixel column are drawn as one vertical stroke from the column's highest
// to its lowest value, ending at its last: the picture keeps every peak and stays a few kilobytes
// per pixel column however many events the trace has.
std::string step_path(const std::vector<TraceEvent>& events, const Scale& scale, bool reserved) {
  auto value = [&](const TraceEvent& e) { return reserved ? e.reserved : e.allocated; };
  std::string d =
      fmt::format("M{:.2f},{:.2f}", scale.x(events[0].time_ns), scale.y(value(events[0])));
  size_t i = 1;
  while (i < events.size()) {
    const double x = scale.x(events[i].time_ns);
    const double column = std::floor(x);
    int64_t high = value(events[i]), low = high, last = high;
    size_t n = 1;
    for (; i + n < events.size() && std::floor(scale.x(events[i + n].time_ns)) == column; ++n) {
      last = value(events[i + n]);
      high = std::max(high, last);
      low = std::min(low, last);
    }
    if (n == 1) {
      d += fmt::format(" H{:.2f} V{:.2f}", x, scale.y(last));
    } else {
      d += fmt::format(" H{:.2f} V{:.2f} V{:.2f} V{:.2f}", x, scale.y(high), scale.y(low),
                       scale.y(last));
    }
    i += n;
  }
  return d;
}

std::string context_text(const std::vector<TraceContextRecord>& contexts, uint32_t index) {
  if (index >= contexts.size()) return "";
  const TraceContextRecord& c = contexts[index];
  std::string text = c.op.empty() ? "(no op)" : c.op;
  text += c.phase.empty() ? " (no phase)" : " (" + c.phase + ")";
  if (!c.label.empty()) text += " [" + c.label + "]";
  return text;
}

// The legend: line swatches, phase colours, and the largest live blocks at the peak.
void draw_legend(std::string& svg, const std::vector<std::pair<std::string, const char*>>& colours,
                 const std::vector<LiveBlock>& live,
                 const std::vector<TraceContextRecord>& contexts, int64_t peak,
                 bool capacity_drawn) {
  double y = kLegendTop;
  double x = kPlotLeft;
  auto swatch_line = [&](const char* cls, const char* name) {
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
        x, y - 4.0, x + 24.0, y - 4.0, cls, x + 30.0, y, name);
    x += 40.0 + kCharWidth * 10;
  };
  swatch_line("allocated", "allocated");
  swatch_line("reserved", "reserved");
  if (capacity_drawn) swatch_line("capacity", "capacity");
  for (const auto& [phase, colour] : colours) {
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
        x, y - 10.0, colour, x + 16.0, y, xml_escape(phase));
    x += 28.0 + kCharWidth * static_cast<double>(phase.size());
  }
  y += kLineHeight * 1.5;
  uint64_t total = 0;
  for (const LiveBlock& b : live) {
    total += b.nbytes;
  }
  svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"heading\">Largest blocks alive at "
      "the peak ({} allocated in all; {} of its blocks, {}, were allocated during "
      "the trace):</text>\n",
      kPlotLeft, y, byte_text(peak), live.size(), byte_text(static_cast<int64_t>(total)));
  for (size_t i = 0; i < std::min(live.size(), kLegendBlocks); ++i) {
    y += kLineHeight;
    svg += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"mono\" xml:space=\"preserve\">"
        "{:>12}  {}</text>\n",
        kPlotLeft + 8.0, y, byte_text(static_cast<int64_t>(live[i].nbytes)),
        xml_escape(context_text(contexts, live[i].context)));
  }
}

std::string svg_header(double height, std::string_view title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "viewBox=\"0 0 {:.0f} {:.0f}\" font-family=\"sans-serif\" font-size=\"11\">\n"
      "<style>.grid{{stroke:#ddd;stroke-width:1}} .axis{{stroke:#444}} "
      ".frame{{fill:none;stroke:#444}} .allocated{{stroke:#1f5fbf;stroke-width:2;fill:none}} "
      ".reserved{{stroke:#d9822b;stroke-width:2;fill:none;stroke-dasharray:6 3}} "
      ".capacity{{stroke:#b00;stroke-width:1;stroke-dasharray:2 3;fill:none}} "
      ".phase{{fill:#555}} .heading{{font-weight:bold}} "
      ".mono{{font-family:monospace;white-space:pre}} .title{{font-size:15px;font-weight:bold}}"
      "</style>\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{:.1f}\" y=\"24\" class=\"title\">{}</text>\n",
      kWidth, height, kWidth, height, kPlotLeft, xml_escape(title));
}

}  // namespace

std::string trace_to_svg(const std::vector<TraceEvent>& events,
                         const std::vector<TraceContextRecord>& contexts, std::string_view title,
                         size_t capacity) {
  if (events.empty()) {
    return svg_header(kPlotTop + 40.0, title) +
           fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">no events recorded</text>\n</svg>\n",
                       kPlotLeft, kPlotTop + 10.0);
  }
  Scale scale;
  scale.t0 = static_cast<double>(events.front().time_ns);
  scale.t1 = std::max(static_cast<double>(events.back().time_ns), scale.t0 + 1.0);
  size_t peak_index = 0;
  int64_t max_reserved = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].allocated > events[peak_index].allocated) peak_index = i;
    max_reserved = std::max(max_reserved, events[i].reserved);
  }
  const int64_t peak = events[peak_index].allocated;
  const auto cap = static_cast<int64_t>(std::min<size_t>(capacity, INT64_MAX));
  // The capacity is drawn only when it is on the same scale as what the trace reserved.
  const bool capacity_drawn =
      cap > 0 &&
      static_cast<double>(cap) <= 2.0 * static_cast<double>(std::max<int64_t>(max_reserved, 1));
  scale.y_max =
      static_cast<double>(std::max<int64_t>({1, max_reserved, peak, capacity_drawn ? cap : 0}));
  scale.y_max *= 1.05;  // headroom above the highest line

  const std::vector<Band> bands = phase_bands(events, contexts);
  const auto colours = phase_colours(bands);
  const std::vector<LiveBlock> live = live_at(events, peak_index);
  const double height =
      kLegendTop + kLineHeight * (3.0 + static_cast<double>(std::min(live.size(), kLegendBlocks)));

  std::string svg = svg_header(height, title);
  svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"42\">{} events; peak allocated {}, peak reserved {}"
      "{}</text>\n",
      kPlotLeft, events.size(), byte_text(peak), byte_text(max_reserved),
      cap > 0 ? ", device capacity " + byte_text(cap) : std::string());
  draw_bands(svg, bands, colours, scale);
  draw_axes(svg, scale);
  if (capacity_drawn) {
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
        "class=\"capacity\"/>\n",
        kPlotLeft, scale.y(cap), kPlotRight, scale.y(cap));
  }
  svg += fmt::format("<path d=\"{}\" class=\"reserved\"/>\n", step_path(events, scale, true));
  svg += fmt::format("<path d=\"{}\" class=\"allocated\"/>\n", step_path(events, scale, false));
  const double px = scale.x(events[peak_index].time_ns), py = scale.y(peak);
  const bool right_half = px > (kPlotLeft + kPlotRight) / 2;
  svg += fmt::format(
      "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#1f5fbf\"/>"
      "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\">peak {}</text>\n",
      px, py, right_half ? px - 6.0 : px + 6.0, py - 6.0, right_half ? "end" : "start",
      byte_text(peak));
  draw_legend(svg, colours, live, contexts, peak, capacity_drawn);
  svg += "</svg>\n";
  return svg;
}

}  // namespace memgrad
