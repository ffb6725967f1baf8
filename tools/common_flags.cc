#include "tools/common_flags.h"

#include <cstdio>

#include "absl/flags/flag.h"
#include "scheduler/ir/schedule_io.h"
#include "scheduler/ir/schedule_json.h"

ABSL_FLAG(std::string, output, "", "write the result to this file (.json or .csv)");
ABSL_FLAG(bool, json, false, "print the result as JSON");
ABSL_FLAG(bool, legacy_names, false,
          "read CSV files with the old zero-bubble names (B = input backward, W = weight)");
ABSL_FLAG(std::string, model, "", "the cost model file (jitpipe.model JSON)");
ABSL_FLAG(std::string, trace, "", "write a Chrome trace (Perfetto, chrome://tracing) to this file");
ABSL_FLAG(bool, overlap, false,
          "run the overlap pass: reorder Ws so gradient reductions hide under compute "
          "(needs REDUCE_GRAD)");

namespace jitpipe::cli {

absl::StatusOr<Schedule> LoadInputSchedule(const std::string& path) {
  CsvReadOptions options;
  options.legacy_backward_names = absl::GetFlag(FLAGS_legacy_names);
  return LoadSchedule(path, options);
}

void PrintScheduleJson(const Schedule& schedule) {
  WriteScheduleJson(schedule, [](absl::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
  });
}

}  // namespace jitpipe::cli
