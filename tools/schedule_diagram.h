// The schedule diagram papers draw (traces/svg_render.h) of a simulated
// step: a row per rank, a block per compute action at its simulated start,
// as wide as its duration, coloured by kind (F, I, W, B, OVERLAP_F_B; a
// darker shade for a rank's later stages) and labelled with its microbatch;
// gradient reductions as thin bars. `render` and `compare --svg` draw it.
#ifndef JITPIPE_TOOLS_SCHEDULE_DIAGRAM_H_
#define JITPIPE_TOOLS_SCHEDULE_DIAGRAM_H_

#include <string>

#include "absl/strings/string_view.h"
#include "stages/predict/predict.h"
#include "traces/svg_render.h"

namespace jitpipe::cli {

// REQUIRES: `p` was predicted with record_timeline.
SvgDiagram ScheduleDiagram(const std::string& title, const Prediction& p, absl::string_view unit);

}  // namespace jitpipe::cli

#endif  // JITPIPE_TOOLS_SCHEDULE_DIAGRAM_H_
