#include "tools/model_input.h"

#include <cstdio>

#include "absl/flags/flag.h"
#include "base/status_macros.h"
#include "absl/strings/str_cat.h"
#include "scheduler/ir/model_file.h"
#include "tools/common_flags.h"

ABSL_FLAG(std::string, layout, "",
          "version 2 models: the layers of each stage, Megatron's layout string, e.g. "
          "\"Et*3|t*4|t*4|t*3L\" (E embedding, t layer, L loss, | between stages, *N repeats)");
ABSL_FLAG(std::string, partition, "even",
          "version 2 models: cut the layers into stages evenly or balanced (the cut with the "
          "smallest simulated step)");

namespace jitpipe::cli {

absl::StatusOr<PartitionChoice> PartitionFromFlags() {
  PartitionChoice choice;
  absl::StatusOr<PartitionMethod> method = ParsePartitionMethod(absl::GetFlag(FLAGS_partition));
  if (!method.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--partition: ", method.status().message()));
  }
  choice.method = *method;
  choice.layout = absl::GetFlag(FLAGS_layout);
  ASSIGN_OR_RETURN(choice.time_budget, TimeBudgetFromFlags());
  return choice;
}

absl::StatusOr<StagedModel> LoadModelForSchedule(const std::string& path,
                                                 const Schedule& schedule,
                                                 const PartitionChoice& choice) {
  absl::StatusOr<ModelFile> file = LoadModelFile(path, MaxInputBytes());
  if (!file.ok()) return file.status();
  absl::StatusOr<StagedModel> staged = ModelForSchedule(*file, schedule, choice);
  if (!staged.ok()) {
    return absl::Status(staged.status().code(),
                        absl::StrCat(path, ": ", staged.status().message()));
  }
  if (staged->budget_ended) {
    std::fprintf(stderr,
                 "note: --time-budget ended the balanced partition's search; its cut is the "
                 "best found so far\n");
  }
  return staged;
}

}  // namespace jitpipe::cli
