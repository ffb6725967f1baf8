// `jitpipe compare` on a version 2 (layered) model: the table, --json and
// the winner's SVG (planning/compare.h does the work).
#ifndef JITPIPE_TOOLS_COMPARE_REPORT_H_
#define JITPIPE_TOOLS_COMPARE_REPORT_H_

#include <string>

#include "absl/status/status.h"
#include "planning/compare.h"
#include "scheduler/ir/layered_model.h"

namespace jitpipe::cli {

struct CompareHeader {
  std::string model_path;
  const LayeredModel* model = nullptr;
  const CompareOptions* options = nullptr;
};

// The table: one line per row (schedule, v, step (the makespan), bubble and
// its split into pipeline bubble and stage imbalance, span bubble, exposed
// reduction, tokens/s per GPU, MFU, the heaviest rank's memory, fits or OOM
// by how much), the best marked "*"; then what the figures mean here (and
// which the model cannot give), rows marked as the same program, searches
// the time budget cut short, candidates it left unjudged, and the refusals
// of schedules that no v accepted.
void PrintComparisonTable(const CompareHeader& header, const Comparison& c);

// The same as one JSON object on stdout; per row also step_s,
// pipeline_bubble_fraction, imbalance_fraction, tokens_per_step,
// tokens_per_s (the job), tokens_per_s_per_gpu and mfu (null when unknown).
void PrintComparisonJson(const CompareHeader& header, const Comparison& c);

// Renders the best row (the first that fits) to `svg_path` with its cut.
// Errors: FailedPrecondition when no row fits; those of the simulation and
// of writing the file.
absl::Status WriteWinnerSvg(const CompareHeader& header, const Comparison& c,
                            const std::string& svg_path);

}  // namespace jitpipe::cli

#endif  // JITPIPE_TOOLS_COMPARE_REPORT_H_
