// RenderSvg: a pipeline diagram of the kind papers draw (GPipe, 1F1B, the
// zero-bubble schedules) as a standalone SVG document.
//
//   title
//   rank 0 |[F0][F1]   [B0]...        a row per lane, blocks placed by time
//          |     ===                  an optional thin band under each row
//   rank 1 |   [F0][F1]...
//          +----+----+----+-- us      a time axis with round ticks
//   [ ] F  [ ] B  [ ] W ...           a legend of the styles used
//
// Blocks are filled with their style's colour and labelled (the label is
// left out where the block is too narrow for it); each carries an SVG
// <title> tooltip. Widths are proportional to durations: the plot spans
// [0, the latest block end] across options.plot_width_px.
//
// Pure and thread-compatible.
#ifndef JITPIPE_TRACES_SVG_RENDER_H_
#define JITPIPE_TRACES_SVG_RENDER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace jitpipe {

struct SvgStyle {
  std::string name = {};   // legend text, e.g. "F (forward)"
  std::string fill = {};   // a CSS colour, e.g. "#6baed6"
  std::string text_color = {};  // the label's colour
};

struct SvgBlock {
  int row = 0;             // index into SvgDiagram::rows
  bool thin = false;       // in the thin band under the row (e.g. reductions)
  double start = 0;        // in the diagram's time unit
  double duration = 0;
  int style = 0;           // index into SvgDiagram::styles
  std::string label = {};  // drawn inside the block, e.g. the microbatch
  std::string tooltip = {};  // e.g. "3W5: 12 - 13 us"
};

struct SvgDiagram {
  std::string title = {};
  std::vector<std::string> rows = {};  // labels, top to bottom
  std::vector<SvgStyle> styles = {};  // the legend shows the ones blocks use, in this order
  std::vector<SvgBlock> blocks = {};
  std::string time_unit = "us";   // the axis label
};

struct SvgOptions {
  double plot_width_px = 1200;
  double row_height_px = 26;
};

// Returns the SVG document. Errors: InvalidArgument naming the block (by
// its index) for a row or style out of range, or a start or duration that
// is negative or not finite; InvalidArgument for options that are not
// positive.
absl::StatusOr<std::string> RenderSvg(const SvgDiagram& diagram, const SvgOptions& options = {});

// The axis tick spacing for a span of `extent` time units: the smallest of
// 1, 2 and 5 times a power of ten that gives at most `max_ticks` intervals.
// REQUIRES: extent > 0, max_ticks >= 1.
double TickStep(double extent, int max_ticks);

}  // namespace jitpipe

#endif  // JITPIPE_TRACES_SVG_RENDER_H_
