// A step x rank grid attached to an error Status, for whoever reports the
// error (the CLI prints it below the one-line message).
//
// Validation errors keep a one-line message naming rank, index and action;
// the grid, in PyTorch's _format_pipeline_order layout with
// "<-- ERROR HERE" on the failing step, travels as a Status payload so it
// survives RETURN_IF_ERROR and prefixing by callers that copy the payloads.
#ifndef JITPIPE_SCHEDULER_ANALYSIS_GRID_REPORT_H_
#define JITPIPE_SCHEDULER_ANALYSIS_GRID_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// The payload's type URL.
inline constexpr absl::string_view kGridPayloadUrl = "type.jitpipe/schedule_grid";

// `status` with `grid` attached. REQUIRES: !status.ok().
absl::Status WithGrid(absl::Status status, absl::string_view grid);

// The grid attached to `status`, if any.
std::optional<std::string> GridOf(const absl::Status& status);

// FormatPipelineOrder(ranks, error_step) cut to a window of at most
// `max_rows` step rows around `error_step` (centred where the grid allows).
// Steps keep their numbers and columns are as wide as the window needs;
// each side that was cut gets one line saying which steps are not shown,
// e.g. "  (steps 0-41 not shown)". The whole grid,
// byte-identical to FormatPipelineOrder, when it has at most `max_rows`
// steps. REQUIRES: max_rows >= 1, 0 <= error_step < the longest program.
std::string FormatGridExcerpt(const std::vector<RankProgram>& ranks, int error_step,
                              int max_rows);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_ANALYSIS_GRID_REPORT_H_
