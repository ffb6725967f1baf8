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
ABSL_FLAG(std::string, partition, "",
          "version 2 models: cut the layers into stages even or balanced (the cut with the "
          "smallest simulated step); unset: the cut the schedule file records (generate "
          "--schedule auto writes it), else even (auto: balanced)");

namespace jitpipe::cli {

absl::StatusOr<PartitionChoice> PartitionFromFlags() {
  PartitionChoice choice;
  const std::string given = absl::GetFlag(FLAGS_partition);
  if (!given.empty()) {
    absl::StatusOr<PartitionMethod> method = ParsePartitionMethod(given);
    if (!method.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--partition: ", method.status().message()));
    }
    choice.method = *method;
    choice.use_recorded_layout = false;
  }
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
  if (!staged->model_mismatch.empty()) {
    std::fprintf(stderr, "note: %s: %s\n", path.c_str(), staged->model_mismatch.c_str());
  }
  if (staged->budget_ended) {
    std::fprintf(stderr,
                 "note: --time-budget ended the balanced partition's search; its cut is the "
                 "best found so far\n");
  }
  return staged;
}

std::string CutLine(const StagedModel& staged) {
  if (!staged.layered) return "";
  const std::string how = staged.how == "recorded" ? "as the schedule file records it"
                          : staged.how == "layout"   ? "--layout"
                                                     : staged.how;
  return absl::StrCat("cut: ", staged.layout, " (", how, ")");
}

}  // namespace jitpipe::cli
