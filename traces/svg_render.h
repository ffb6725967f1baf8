// RenderSvg: a pipeline diagram of the kind papers draw (GPipe, 1F1B, the
// zero-bubble schedules) as a standalone SVG document.
//
//   title, wrapped to the page's width
//   rank 0 |[0/0][0/1]   [0/0]...     a row per lane, blocks placed by time
//          |  ==   ===                thin lanes under each row (sends, reductions)
//   rank 1 |   [1/0][1/1]...          the row's background is its idle time
//          +----+----+----+--         a time axis with round ticks
//          0    1    2    3  time (ms)
//   [ ] idle  [ ] F  [ ] B ...        a legend of the styles used,
//   labels: stage/microbatch ...      then the diagram's notes
//
// Widths are proportional to durations: the plot spans [0, the latest block
// end] across the plot width, which is options.plot_width_px or, when that
// is 0, AutoPlotWidthPx. A block shows its label where the label fits inside
// it (TextWidthPx, svg_text.h), else its short label where that fits, else
// nothing; every block carries an SVG <title> tooltip. Microsecond times
// are drawn in us, ms or s by the extent's magnitude (FormatMicros'
// convention, base/time_units.h), with ticks at 1, 2 or 5 times a power of
// ten.
//
// Text elements carry a class: "title", "row", "label", "tick", "axis",
// "legend", "note".
//
// Pure and thread-compatible.
#ifndef JITPIPE_TRACES_SVG_RENDER_H_
#define JITPIPE_TRACES_SVG_RENDER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jitpipe {

struct SvgStyle {
  std::string name = {};   // legend text, e.g. "F (forward)"
  std::string fill = {};   // a CSS colour, e.g. "#6baed6"
  std::string text_color = {};  // the label's colour
};

struct SvgBlock {
  int row = 0;             // index into SvgDiagram::rows
  // 0: the row's band. 1, 2, ...: thin lanes under it, in order; a lane no
  // block uses takes no space. Thin blocks are not labelled.
  int lane = 0;
  double start = 0;        // in the diagram's time unit
  double duration = 0;
  int style = 0;           // index into SvgDiagram::styles
  std::string label = {};  // drawn inside the block where it fits, e.g. "3/12"
  std::string short_label = {};  // drawn instead where only it fits, e.g. "12"
  std::string tooltip = {};  // e.g. "3W5: 12 - 13 us"
};

enum class SvgTimeUnit {
  kMicroseconds,  // drawn in us, ms or s by magnitude
  kAbstract,      // drawn as is, in SvgDiagram::abstract_unit
};

struct SvgDiagram {
  std::string title = {};
  std::vector<std::string> rows = {};  // labels, top to bottom
  std::vector<SvgStyle> styles = {};  // the legend shows the ones blocks use, in this order
  std::vector<SvgBlock> blocks = {};
  SvgTimeUnit time_unit = SvgTimeUnit::kMicroseconds;
  std::string abstract_unit = "units";  // the axis label's unit for kAbstract
  // The legend's first entry, for the rows' background; empty: not listed.
  std::string idle_name = "idle (bubble)";
  std::vector<std::string> notes = {};  // lines under the legend, e.g. the label format
};

// Bounds RenderSvg accepts (plot width 0 means automatic).
inline constexpr double kMinPlotWidthPx = 100;
inline constexpr double kMaxPlotWidthPx = 200000;
inline constexpr double kMinRowHeightPx = 8;
inline constexpr double kMaxRowHeightPx = 200;

struct SvgOptions {
  double plot_width_px = 0;  // the time axis; 0: AutoPlotWidthPx
  double row_height_px = 26;  // a row's band, thin lanes not counted
};

// Returns the SVG document (well-formed XML; every text escaped). Errors:
// InvalidArgument naming the block (by its index) for a row or style out of
// range, a negative lane, or a start or duration that is negative or not
// finite; InvalidArgument from ValidateSvgOptions.
absl::StatusOr<std::string> RenderSvg(const SvgDiagram& diagram, const SvgOptions& options = {});

// OK, or InvalidArgument naming the option out of the bounds above.
absl::Status ValidateSvgOptions(const SvgOptions& options);

// The plot width the diagram gets by default: wide enough that 9 in 10 of
// its labelled row blocks show their label at `row_height_px`, so that the
// width grows with the step (pp 8, m 64: 16000 to 19000 px), clamped to
// [kMinAutoWidthPx, kMaxAutoWidthPx]; kDefaultPlotWidthPx when no block is
// labelled.
inline constexpr double kMinAutoWidthPx = 800;
inline constexpr double kMaxAutoWidthPx = 24000;
inline constexpr double kDefaultPlotWidthPx = 1200;
double AutoPlotWidthPx(const SvgDiagram& diagram, double row_height_px);

// The axis tick spacing for a span of `extent` time units: the smallest of
// 1, 2 and 5 times a power of ten that gives at most `max_ticks` intervals.
// REQUIRES: extent > 0, max_ticks >= 1.
double TickStep(double extent, int max_ticks);

}  // namespace jitpipe

#endif  // JITPIPE_TRACES_SVG_RENDER_H_
