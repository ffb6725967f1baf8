// The schedule diagram papers draw (traces/svg_render.h) of a simulated
// step: a row per rank; a block per compute action at its simulated start,
// as wide as its duration, coloured by kind (F, I, W, B, OVERLAP_F_B; a
// darker shade for a rank's later stages) and labelled "stage/microbatch"
// (the microbatch alone where the block is narrow); under each row a thin
// lane of sends and receives (from post to transfer completion) and one of
// gradient reductions and FSDP all-gathers, each drawn where it takes time.
// The rows' background is idle time. `render` and `compare --svg` draw it.
#ifndef JITPIPE_TOOLS_SCHEDULE_DIAGRAM_H_
#define JITPIPE_TOOLS_SCHEDULE_DIAGRAM_H_

#include <string>

#include "absl/strings/string_view.h"
#include "stages/predict/predict.h"
#include "traces/svg_render.h"

namespace jitpipe::cli {

// `unit`: kMicroseconds for a model's times, kAbstract for unit costs (drawn
// as "units of F").
// REQUIRES: `p` was predicted with record_timeline.
SvgDiagram ScheduleDiagram(const std::string& title, const Prediction& p, SvgTimeUnit unit);

// The diagram's title: the schedule's name (`fallback_name` when it has
// none), pp, v, m, the stage count (and chains, where more than one), the
// makespan (FormatMicros, or units of F) and the bubble, then `costs` (what
// the times come from), e.g.
//   "interleaved-1f1b: pp 8, v 2, m 64, 16 stages; makespan 4.581 s,
//    bubble 19.4%; model m.json"
std::string ScheduleTitle(absl::string_view fallback_name, const Prediction& p, SvgTimeUnit unit,
                          absl::string_view costs);

}  // namespace jitpipe::cli

#endif  // JITPIPE_TOOLS_SCHEDULE_DIAGRAM_H_
