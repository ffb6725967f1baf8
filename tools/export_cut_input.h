// Where `jitpipe export` takes a schedule's layer cut from, in this order:
//   1. the layout the schedule file records ("layout" in jitpipe JSON),
//      checked against --model when one is given;
//   2. --layout (with --model: checked against it; alone: read as it is);
//   3. --model, a version 2 model, cut evenly or --partition balanced;
//   4. none: the framework's own even split, which the export notes.
#ifndef JITPIPE_TOOLS_EXPORT_CUT_INPUT_H_
#define JITPIPE_TOOLS_EXPORT_CUT_INPUT_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "planning/layer_cut.h"
#include "planning/model_for_schedule.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe::cli {

struct CutInput {
  std::optional<LayerCut> cut = {};
  std::string how = {};  // "the file's layout", "--layout", "--model (even)", ...
};

struct CutRequest {
  std::string schedule_path;  // for messages
  std::string layout;         // --layout; "" when not given
  std::string model_path;     // --model; "" when not given
  PartitionChoice partition;  // --partition and --time-budget
};

// The cut of `schedule` (above). Errors: InvalidArgument starting with the
// file it concerns, e.g.
//   s.json records layout "Et|tL"; --layout "Ett|L" differs
//   m.json: layout "Et*3|t" ...: from ParseLayout
//   m.json: export takes its layers from a version 2 model; this one gives per-stage costs
// and those of LoadModelFile.
absl::StatusOr<CutInput> ResolveCut(const Schedule& schedule, const CutRequest& request);

// `status` with "<path>: " before its message (the same code).
absl::Status WithPath(absl::string_view path, const absl::Status& status);

}  // namespace jitpipe::cli

#endif  // JITPIPE_TOOLS_EXPORT_CUT_INPUT_H_
