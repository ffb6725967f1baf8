// Flags shared by several subcommands (each command lists the ones it takes).
#ifndef JITPIPE_TOOLS_COMMON_FLAGS_H_
#define JITPIPE_TOOLS_COMMON_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/schedule.h"

ABSL_DECLARE_FLAG(std::string, output);
ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(bool, legacy_names);
ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(std::string, trace);
ABSL_DECLARE_FLAG(bool, overlap);
// A built-in schedule: generate, lower --schedule, compare.
ABSL_DECLARE_FLAG(std::string, schedule);
ABSL_DECLARE_FLAG(int, pp);
ABSL_DECLARE_FLAG(int, microbatches);
ABSL_DECLARE_FLAG(int, stages_per_rank);

namespace jitpipe::cli {

// Loads the schedule at `path` (JSON or CSV), honouring --legacy_names.
absl::StatusOr<Schedule> LoadInputSchedule(const std::string& path);

// The built-in schedule --schedule, --pp, --microbatches and
// --stages-per-rank name (Generate() checks them).
GenerateOptions GenerateOptionsFromFlags();

// Writes the schedule's JSON to stdout, streamed (never whole in memory).
void PrintScheduleJson(const Schedule& schedule);

}  // namespace jitpipe::cli

#endif  // JITPIPE_TOOLS_COMMON_FLAGS_H_
