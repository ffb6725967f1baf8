// --model for a schedule, with --layout and --partition: a model file of
// either version as the per-stage cost model of that schedule
// (planning/model_for_schedule.h).
#ifndef JITPIPE_TOOLS_MODEL_INPUT_H_
#define JITPIPE_TOOLS_MODEL_INPUT_H_

#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "planning/model_for_schedule.h"
#include "scheduler/ir/schedule.h"
#include "stages/predict/predict.h"

ABSL_DECLARE_FLAG(std::string, layout);
ABSL_DECLARE_FLAG(std::string, partition);

namespace jitpipe::cli {

// --partition and --layout as a PartitionChoice. Errors: InvalidArgument
// for a --partition that is neither even nor balanced (a usage error).
absl::StatusOr<PartitionChoice> PartitionFromFlags();

// Loads the model at `path` and stages it for `schedule`. Every error
// message starts with the path. Errors: those of LoadModelFile and
// ModelForSchedule.
absl::StatusOr<StagedModel> LoadModelForSchedule(const std::string& path,
                                                 const Schedule& schedule,
                                                 const PartitionChoice& choice);

// "cut: Et*3|t*2|t*2|tL (balanced)": the line plan and simulate print for
// a version 2 model; "" for a version 1 model (its stages are as given).
std::string CutLine(const StagedModel& staged);

}  // namespace jitpipe::cli

#endif  // JITPIPE_TOOLS_MODEL_INPUT_H_
