#include "traces/svg_render.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "traces/svg_text.h"

namespace jitpipe {
namespace {

constexpr double kPagePad = 8;
constexpr double kMinMarginLeft = 80;
constexpr double kMarginRight = 24;
constexpr double kTitleFont = 15;
constexpr double kTitleLine = 19;
constexpr double kRowFont = 12;
constexpr double kRowGap = 6;
constexpr double kThinShare = 0.35;  // a thin lane's height, as a share of the row's band
constexpr double kLabelPad = 2;      // each side of a label inside its block
constexpr double kTickSpacingPx = 80;
constexpr double kTickFont = 11;
constexpr double kAxisHeight = 40;
constexpr double kLegendFont = 12;
constexpr double kLegendSwatch = 14;
constexpr double kLegendRowHeight = 22;
constexpr double kLegendItemGap = 24;
constexpr double kLegendMaxWidth = 1400;  // the legend stays near the row labels
constexpr double kNoteLine = 16;

std::string Px(double v) { return absl::StrFormat("%.2f", v); }

double LabelFont(double band) { return std::min(12.0, band * 0.55); }

double Extent(const SvgDiagram& d) {
  double extent = 0;
  for (const SvgBlock& b : d.blocks) extent = std::max(extent, b.start + b.duration);
  return extent > 0 ? extent : 1;
}

bool Fits(const std::string& text, double font, double w, double h) {
  return !text.empty() && TextWidthPx(text, font) + 2 * kLabelPad <= w && font <= h;
}

absl::Status CheckBlocks(const SvgDiagram& d) {
  for (size_t i = 0; i < d.blocks.size(); ++i) {
    const SvgBlock& b = d.blocks[i];
    auto bad = [i](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat("block ", i, ": ", what));
    };
    if (b.row < 0 || b.row >= static_cast<int>(d.rows.size())) {
      return bad(absl::StrCat("row ", b.row, " is not one of the ", d.rows.size(), " rows"));
    }
    if (b.style < 0 || b.style >= static_cast<int>(d.styles.size())) {
      return bad(absl::StrCat("style ", b.style, " is not one of the ", d.styles.size(),
                              " styles"));
    }
    if (b.lane < 0) return bad(absl::StrCat("lane ", b.lane, " is negative"));
    if (!std::isfinite(b.start) || b.start < 0 || !std::isfinite(b.duration) || b.duration < 0) {
      return bad(absl::StrCat("start ", b.start, " and duration ", b.duration,
                              " must be finite and >= 0"));
    }
  }
  return absl::OkStatus();
}

// The axis' unit: microseconds become us, ms or s by the extent's magnitude.
struct TimeScale {
  double divisor = 1;
  std::string unit;
};

TimeScale ScaleFor(const SvgDiagram& d, double extent) {
  if (d.time_unit == SvgTimeUnit::kAbstract) return {1, d.abstract_unit};
  if (extent < 1e3) return {1, "us"};
  if (extent < 1e6) return {1e3, "ms"};
  return {1e6, "s"};
}

// The legend's swatches: the idle background, then the styles in use.
struct LegendEntry {
  std::string name;
  std::string fill;
};

std::vector<LegendEntry> LegendEntries(const SvgDiagram& d) {
  std::vector<LegendEntry> entries;
  if (!d.idle_name.empty() && !d.rows.empty()) entries.push_back({d.idle_name, "#eeeeee"});
  std::vector<bool> used(d.styles.size(), false);
  for (const SvgBlock& b : d.blocks) used[b.style] = true;
  for (size_t s = 0; s < d.styles.size(); ++s) {
    if (used[s]) entries.push_back({d.styles[s].name, d.styles[s].fill});
  }
  return entries;
}

double LegendItemWidth(const LegendEntry& e) {
  return kLegendSwatch + 6 + TextWidthPx(e.name, kLegendFont);
}

// Where everything goes. Horizontal: the row labels' margin, the plot, a
// right margin; the page is widened where a legend entry needs it. Vertical:
// the title's lines, the rows (a band and the used thin lanes each), the
// axis, the legend and the notes.
struct Layout {
  double left = 0;         // the plot's left edge
  double width = 0;        // the plot's width
  double page_width = 0;
  std::vector<std::string> title_lines;
  double plot_top = 0;
  double band = 0;
  double thin = 0;          // one thin lane's height
  std::vector<int> lanes;   // the thin lanes in use, ascending
  double row_pitch = 0;
  double plot_bottom = 0;

  double RowTop(int row) const { return plot_top + row * row_pitch; }
  double LaneTop(int row, int lane) const {
    if (lane == 0) return RowTop(row);
    const auto slot = std::lower_bound(lanes.begin(), lanes.end(), lane) - lanes.begin();
    return RowTop(row) + band + static_cast<double>(slot) * thin + 1;
  }
  double LaneHeight(int lane) const { return lane == 0 ? band : thin - 2; }
};

Layout MakeLayout(const SvgDiagram& d, const SvgOptions& o) {
  Layout l;
  l.left = kMinMarginLeft;
  for (const std::string& row : d.rows) {
    l.left = std::max(l.left, std::ceil(TextWidthPx(row, kRowFont)) + 2 * kPagePad);
  }
  l.width = o.plot_width_px > 0 ? o.plot_width_px : AutoPlotWidthPx(d, o.row_height_px);
  l.page_width = l.left + l.width + kMarginRight;
  for (const LegendEntry& e : LegendEntries(d)) {
    l.page_width = std::max(l.page_width, std::ceil(LegendItemWidth(e)) + 2 * kPagePad);
  }
  l.title_lines =
      WrapText(d.title, kTitleFont, l.page_width - 2 * kPagePad, FontWeight::kBold);
  l.plot_top = kPagePad + static_cast<double>(l.title_lines.size()) * kTitleLine + 10;
  l.band = o.row_height_px;
  for (const SvgBlock& b : d.blocks) {
    if (b.lane > 0) l.lanes.push_back(b.lane);
  }
  std::sort(l.lanes.begin(), l.lanes.end());
  l.lanes.erase(std::unique(l.lanes.begin(), l.lanes.end()), l.lanes.end());
  l.thin = std::max(4.0, std::round(o.row_height_px * kThinShare));
  l.row_pitch = l.band + static_cast<double>(l.lanes.size()) * l.thin + kRowGap;
  l.plot_bottom = l.plot_top + static_cast<double>(d.rows.size()) * l.row_pitch;
  return l;
}

void AppendTitle(const Layout& l, std::string& out) {
  for (size_t i = 0; i < l.title_lines.size(); ++i) {
    absl::StrAppend(&out, "<text class=\"title\" x=\"", Px(kPagePad), "\" y=\"",
                    Px(kPagePad + kTitleFont + static_cast<double>(i) * kTitleLine),
                    "\" font-size=\"", Px(kTitleFont), "\" font-weight=\"bold\">",
                    EscapeXml(l.title_lines[i]), "</text>\n");
  }
}

// Each row's label and its band's background: the idle colour under blocks.
void AppendRows(const SvgDiagram& d, const Layout& l, std::string& out) {
  for (size_t r = 0; r < d.rows.size(); ++r) {
    const double top = l.RowTop(static_cast<int>(r));
    absl::StrAppend(&out, "<rect class=\"idle\" x=\"", Px(l.left), "\" y=\"", Px(top),
                    "\" width=\"", Px(l.width), "\" height=\"", Px(l.band), "\" fill=\"#eeeeee\"/>",
                    "<text class=\"row\" x=\"", Px(l.left - kPagePad), "\" y=\"",
                    Px(top + l.band / 2), "\" font-size=\"", Px(kRowFont),
                    "\" text-anchor=\"end\" dominant-baseline=\"central\">", EscapeXml(d.rows[r]),
                    "</text>\n");
  }
}

void AppendBlocks(const SvgDiagram& d, const Layout& l, double extent, std::string& out) {
  const double font = LabelFont(l.band);
  for (const SvgBlock& b : d.blocks) {
    const SvgStyle& style = d.styles[b.style];
    const double x = l.left + b.start / extent * l.width;
    const double w = std::max(b.duration / extent * l.width, 0.5);
    const double y = l.LaneTop(b.row, b.lane);
    const double h = l.LaneHeight(b.lane);
    absl::StrAppend(&out, "<g><title>", EscapeXml(b.tooltip), "</title><rect x=\"", Px(x),
                    "\" y=\"", Px(y), "\" width=\"", Px(w), "\" height=\"", Px(h), "\" fill=\"",
                    EscapeXml(style.fill), "\" stroke=\"#ffffff\" stroke-width=\"0.6\"/>");
    const std::string* label = nullptr;
    if (b.lane == 0 && Fits(b.label, font, w, h)) label = &b.label;
    if (b.lane == 0 && label == nullptr && Fits(b.short_label, font, w, h)) {
      label = &b.short_label;
    }
    if (label != nullptr) {
      absl::StrAppend(&out, "<text class=\"label\" x=\"", Px(x + w / 2), "\" y=\"",
                      Px(y + h / 2), "\" font-size=\"", Px(font), "\" fill=\"",
                      EscapeXml(style.text_color),
                      "\" text-anchor=\"middle\" dominant-baseline=\"central\">",
                      EscapeXml(*label), "</text>");
    }
    absl::StrAppend(&out, "</g>\n");
  }
}

// Grid lines and ticks at round values of the axis' unit, and the unit.
void AppendAxis(const Layout& l, double extent, const TimeScale& scale, std::string& out) {
  const double y = l.plot_bottom + 4;
  absl::StrAppend(&out, "<line x1=\"", Px(l.left), "\" y1=\"", Px(y), "\" x2=\"",
                  Px(l.left + l.width), "\" y2=\"", Px(y),
                  "\" stroke=\"#333333\" stroke-width=\"1\"/>\n");
  const double shown = extent / scale.divisor;
  // At most a tick per kTickSpacingPx, and at least two ticks (0 and one
  // more) on the narrowest plots.
  int max_ticks = std::max(1, static_cast<int>(l.width / kTickSpacingPx));
  double step = TickStep(shown, max_ticks);
  while (step > shown * (1 + 1e-12)) step = TickStep(shown, ++max_ticks);
  for (int i = 0; i * step <= shown * (1 + 1e-12); ++i) {
    const double t = i * step;
    const double x = l.left + t / shown * l.width;
    absl::StrAppend(&out, "<line x1=\"", Px(x), "\" y1=\"", Px(y), "\" x2=\"", Px(x),
                    "\" y2=\"", Px(y + 5), "\" stroke=\"#333333\" stroke-width=\"1\"/>",
                    "<line x1=\"", Px(x), "\" y1=\"", Px(l.plot_top), "\" x2=\"", Px(x),
                    "\" y2=\"", Px(y), "\" stroke=\"#000000\" stroke-opacity=\"0.12\"/>",
                    "<text class=\"tick\" x=\"", Px(x), "\" y=\"", Px(y + 17),
                    "\" font-size=\"", Px(kTickFont), "\" text-anchor=\"middle\">",
                    absl::StrFormat("%.6g", t), "</text>\n");
  }
  absl::StrAppend(&out, "<text class=\"axis\" x=\"", Px(l.left + l.width), "\" y=\"",
                  Px(y + 32), "\" font-size=\"", Px(kTickFont), "\" text-anchor=\"end\">time (",
                  EscapeXml(scale.unit), ")</text>\n");
}

// The legend's swatches, flowed into lines, then the notes, wrapped.
// Returns its height.
double AppendLegend(const SvgDiagram& d, const Layout& l, double top, std::string& out) {
  const double right = std::min(l.page_width, kLegendMaxWidth) - kPagePad;
  double x = kPagePad;
  double y = top;
  bool any = false;
  for (const LegendEntry& e : LegendEntries(d)) {
    const double w = LegendItemWidth(e);
    if (x > kPagePad && x + w > right) {
      x = kPagePad;
      y += kLegendRowHeight;
    }
    absl::StrAppend(&out, "<rect x=\"", Px(x), "\" y=\"", Px(y), "\" width=\"",
                    Px(kLegendSwatch), "\" height=\"", Px(kLegendSwatch), "\" fill=\"",
                    EscapeXml(e.fill), "\" stroke=\"#999999\" stroke-width=\"0.5\"/>",
                    "<text class=\"legend\" x=\"", Px(x + kLegendSwatch + 6), "\" y=\"",
                    Px(y + kLegendSwatch / 2), "\" font-size=\"", Px(kLegendFont),
                    "\" dominant-baseline=\"central\">", EscapeXml(e.name), "</text>\n");
    x += w + kLegendItemGap;
    any = true;
  }
  if (any) y += kLegendRowHeight;
  for (const std::string& note : d.notes) {
    for (const std::string& line : WrapText(note, kLegendFont, right - kPagePad)) {
      absl::StrAppend(&out, "<text class=\"note\" x=\"", Px(kPagePad), "\" y=\"",
                      Px(y + kLegendFont), "\" font-size=\"", Px(kLegendFont), "\">",
                      EscapeXml(line), "</text>\n");
      y += kNoteLine;
    }
  }
  return y - top;
}

}  // namespace

double TickStep(double extent, int max_ticks) {
  double power = std::pow(10.0, std::floor(std::log10(extent / max_ticks)));
  for (;; power *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (extent / (m * power) <= max_ticks) return m * power;
    }
  }
}

absl::Status ValidateSvgOptions(const SvgOptions& o) {
  if (o.plot_width_px != 0 &&
      !(o.plot_width_px >= kMinPlotWidthPx && o.plot_width_px <= kMaxPlotWidthPx)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("plot width %g px is outside [%g, %g] (0: automatic)", o.plot_width_px,
                        kMinPlotWidthPx, kMaxPlotWidthPx));
  }
  if (!(o.row_height_px >= kMinRowHeightPx && o.row_height_px <= kMaxRowHeightPx)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "row height %g px is outside [%g, %g]", o.row_height_px, kMinRowHeightPx,
        kMaxRowHeightPx));
  }
  return absl::OkStatus();
}

double AutoPlotWidthPx(const SvgDiagram& d, double row_height_px) {
  const double font = LabelFont(row_height_px);
  std::vector<double> px_per_unit;  // what each labelled block needs to show its label
  for (const SvgBlock& b : d.blocks) {
    if (b.lane != 0 || b.label.empty() || !(b.duration > 0)) continue;
    px_per_unit.push_back((TextWidthPx(b.label, font) + 2 * kLabelPad) / b.duration);
  }
  if (px_per_unit.empty()) return kDefaultPlotWidthPx;
  const auto nth = px_per_unit.begin() + static_cast<long>(0.9 * (px_per_unit.size() - 1));
  std::nth_element(px_per_unit.begin(), nth, px_per_unit.end());
  return std::clamp(std::ceil(Extent(d) * *nth), kMinAutoWidthPx, kMaxAutoWidthPx);
}

absl::StatusOr<std::string> RenderSvg(const SvgDiagram& d, const SvgOptions& o) {
  if (absl::Status s = ValidateSvgOptions(o); !s.ok()) return s;
  if (absl::Status s = CheckBlocks(d); !s.ok()) return s;
  const double extent = Extent(d);
  const Layout l = MakeLayout(d, o);
  std::string body;
  AppendTitle(l, body);
  AppendRows(d, l, body);
  AppendAxis(l, extent, ScaleFor(d, extent), body);
  AppendBlocks(d, l, extent, body);
  const double legend_top = l.plot_bottom + kAxisHeight + 8;
  const double legend = AppendLegend(d, l, legend_top, body);
  const double page_height = legend_top + legend + kPagePad;
  return absl::StrCat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", Px(l.page_width), "\" height=\"",
      Px(page_height), "\" viewBox=\"0 0 ", Px(l.page_width), " ", Px(page_height),
      "\" font-family=\"Helvetica, Arial, sans-serif\">\n",
      "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n", body, "</svg>\n");
}

}  // namespace jitpipe
