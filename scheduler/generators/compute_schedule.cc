#include "scheduler/generators/compute_schedule.h"

#include "absl/strings/str_cat.h"

namespace jitpipe {

Schedule NewComputeSchedule(absl::string_view name, Placement placement, int pp,
                            int stages_per_rank, int microbatches) {
  Schedule schedule;
  schedule.name = std::string(name);
  schedule.pp = pp;
  schedule.stages_per_rank = stages_per_rank;
  schedule.microbatches = microbatches;
  schedule.chains = 1;
  schedule.placement = placement;
  schedule.stage_to_rank = StageToRank(placement, pp, stages_per_rank);
  schedule.lowered = false;
  schedule.ranks.resize(pp);
  return schedule;
}

absl::Status RequireStagesPerRank(absl::string_view name, int required, int stages_per_rank) {
  if (stages_per_rank == required) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(name, ": needs exactly ", CountOf(required, "stage", "stages"),
                   " per rank, got ", stages_per_rank));
}

std::string CountOf(int n, absl::string_view singular, absl::string_view plural) {
  return absl::StrCat(n, " ", n == 1 ? singular : plural);
}

}  // namespace jitpipe
