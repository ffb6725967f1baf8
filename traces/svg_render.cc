#include "traces/svg_render.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace jitpipe {
namespace {

constexpr double kMarginLeft = 80;
constexpr double kMarginRight = 24;
constexpr double kTitleHeight = 34;
constexpr double kRowGap = 6;
constexpr double kAxisHeight = 40;
constexpr double kLegendRowHeight = 22;
constexpr double kLegendItemWidth = 230;
constexpr int kMaxTicks = 12;

std::string Escape(absl::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Px(double v) { return absl::StrFormat("%.2f", v); }

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
    if (!std::isfinite(b.start) || b.start < 0 || !std::isfinite(b.duration) || b.duration < 0) {
      return bad(absl::StrCat("start ", b.start, " and duration ", b.duration,
                              " must be finite and >= 0"));
    }
  }
  return absl::OkStatus();
}

// Vertical layout: where each row's main band and thin band start.
struct Layout {
  double band = 0;       // main band height
  double thin_band = 0;  // 0 when no block is thin
  double row_pitch = 0;
  double plot_top = kTitleHeight;
  double plot_bottom = 0;
  double RowTop(int row) const { return plot_top + row * row_pitch; }
};

Layout MakeLayout(const SvgDiagram& d, const SvgOptions& o) {
  Layout l;
  l.band = o.row_height_px;
  const bool any_thin = std::any_of(d.blocks.begin(), d.blocks.end(),
                                    [](const SvgBlock& b) { return b.thin; });
  l.thin_band = any_thin ? std::round(o.row_height_px * 0.35) : 0;
  l.row_pitch = l.band + l.thin_band + kRowGap;
  l.plot_bottom = l.plot_top + static_cast<double>(d.rows.size()) * l.row_pitch;
  return l;
}

void AppendBlocks(const SvgDiagram& d, const Layout& l, double extent, double width,
                  std::string& out) {
  const double font = std::min(12.0, l.band * 0.55);
  for (const SvgBlock& b : d.blocks) {
    const SvgStyle& style = d.styles[b.style];
    const double x = kMarginLeft + b.start / extent * width;
    const double w = std::max(b.duration / extent * width, 0.5);
    const double y = l.RowTop(b.row) + (b.thin ? l.band + 1 : 0);
    const double h = b.thin ? l.thin_band - 2 : l.band;
    absl::StrAppend(&out, "<g><title>", Escape(b.tooltip), "</title><rect x=\"", Px(x),
                    "\" y=\"", Px(y), "\" width=\"", Px(w), "\" height=\"", Px(h),
                    "\" fill=\"", Escape(style.fill), "\" stroke=\"#ffffff\" stroke-width=\"0.6\"/>");
    const double text_width = 0.62 * font * static_cast<double>(b.label.size());
    if (!b.thin && !b.label.empty() && text_width + 2 <= w) {
      absl::StrAppend(&out, "<text x=\"", Px(x + w / 2), "\" y=\"", Px(y + h / 2),
                      "\" font-size=\"", Px(font), "\" fill=\"", Escape(style.text_color),
                      "\" text-anchor=\"middle\" dominant-baseline=\"central\">",
                      Escape(b.label), "</text>");
    }
    absl::StrAppend(&out, "</g>\n");
  }
}

void AppendRowLabels(const SvgDiagram& d, const Layout& l, std::string& out) {
  for (size_t r = 0; r < d.rows.size(); ++r) {
    const double y = l.RowTop(static_cast<int>(r)) + l.band / 2;
    absl::StrAppend(&out, "<text x=\"", Px(kMarginLeft - 8), "\" y=\"", Px(y),
                    "\" font-size=\"12\" text-anchor=\"end\" dominant-baseline=\"central\">",
                    Escape(d.rows[r]), "</text>\n");
  }
}

void AppendAxis(const SvgDiagram& d, const Layout& l, double extent, double width,
                std::string& out) {
  const double y = l.plot_bottom + 4;
  absl::StrAppend(&out, "<line x1=\"", Px(kMarginLeft), "\" y1=\"", Px(y), "\" x2=\"",
                  Px(kMarginLeft + width), "\" y2=\"", Px(y),
                  "\" stroke=\"#333333\" stroke-width=\"1\"/>\n");
  const double step = TickStep(extent, kMaxTicks);
  for (int i = 0; i * step <= extent * (1 + 1e-12); ++i) {
    const double t = i * step;
    const double x = kMarginLeft + t / extent * width;
    absl::StrAppend(&out, "<line x1=\"", Px(x), "\" y1=\"", Px(y), "\" x2=\"", Px(x),
                    "\" y2=\"", Px(y + 5), "\" stroke=\"#333333\" stroke-width=\"1\"/>",
                    "<line x1=\"", Px(x), "\" y1=\"", Px(l.plot_top), "\" x2=\"", Px(x),
                    "\" y2=\"", Px(y), "\" stroke=\"#000000\" stroke-opacity=\"0.08\"/>",
                    "<text x=\"", Px(x), "\" y=\"", Px(y + 17),
                    "\" font-size=\"11\" text-anchor=\"middle\">", absl::StrFormat("%g", t),
                    "</text>\n");
  }
  absl::StrAppend(&out, "<text x=\"", Px(kMarginLeft + width), "\" y=\"", Px(y + 32),
                  "\" font-size=\"11\" text-anchor=\"end\">time (", Escape(d.time_unit),
                  ")</text>\n");
}

// The legend: the styles some block uses, in style order, wrapped into rows.
// Returns its height.
double AppendLegend(const SvgDiagram& d, double top, double width, std::string& out) {
  std::vector<bool> used(d.styles.size(), false);
  for (const SvgBlock& b : d.blocks) used[b.style] = true;
  const int per_row = std::max(1, static_cast<int>(width / kLegendItemWidth));
  int n = 0;
  for (size_t s = 0; s < d.styles.size(); ++s) {
    if (!used[s]) continue;
    const double x = kMarginLeft + (n % per_row) * kLegendItemWidth;
    const double y = top + (n / per_row) * kLegendRowHeight;
    absl::StrAppend(&out, "<rect x=\"", Px(x), "\" y=\"", Px(y), "\" width=\"14\" height=\"14\" fill=\"",
                    Escape(d.styles[s].fill), "\"/><text x=\"", Px(x + 20), "\" y=\"", Px(y + 7),
                    "\" font-size=\"12\" dominant-baseline=\"central\">", Escape(d.styles[s].name),
                    "</text>\n");
    ++n;
  }
  return n == 0 ? 0 : ((n - 1) / per_row + 1) * kLegendRowHeight;
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

absl::StatusOr<std::string> RenderSvg(const SvgDiagram& d, const SvgOptions& o) {
  if (!(o.plot_width_px > 0) || !(o.row_height_px > 0)) {
    return absl::InvalidArgumentError("plot width and row height must be positive");
  }
  if (absl::Status s = CheckBlocks(d); !s.ok()) return s;
  double extent = 0;
  for (const SvgBlock& b : d.blocks) extent = std::max(extent, b.start + b.duration);
  if (extent <= 0) extent = 1;
  const Layout l = MakeLayout(d, o);
  const double width = o.plot_width_px;
  std::string body;
  absl::StrAppend(&body, "<text x=\"", Px(kMarginLeft), "\" y=\"22\" font-size=\"15\" ",
                  "font-weight=\"bold\">", Escape(d.title), "</text>\n");
  AppendRowLabels(d, l, body);
  AppendAxis(d, l, extent, width, body);
  AppendBlocks(d, l, extent, width, body);
  const double legend_top = l.plot_bottom + kAxisHeight + 8;
  const double legend = AppendLegend(d, legend_top, width, body);
  const double total_width = kMarginLeft + width + kMarginRight;
  const double total_height = legend_top + legend + 8;
  return absl::StrCat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", Px(total_width), "\" height=\"",
      Px(total_height), "\" viewBox=\"0 0 ", Px(total_width), " ", Px(total_height),
      "\" font-family=\"Helvetica, Arial, sans-serif\">\n",
      "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n", body, "</svg>\n");
}

}  // namespace jitpipe
