#include "scheduler/generators/gpipe.h"

#include "base/status_macros.h"
#include "scheduler/generators/compute_schedule.h"

namespace jitpipe {

absl::StatusOr<Schedule> GenerateGPipe(int pp, int microbatches, int stages_per_rank) {
  RETURN_IF_ERROR(RequireStagesPerRank("gpipe", 1, stages_per_rank));
  Schedule schedule = NewComputeSchedule("gpipe", Placement::kLoop, pp, 1, microbatches);
  for (int r = 0; r < pp; ++r) {
    RankProgram& program = schedule.ranks[r];
    program.reserve(2 * microbatches + 3 * (pp - 1 - r) + r);
    program.resize(r, Action::Bubble());
    for (int mb = 0; mb < microbatches; ++mb) {
      program.push_back(Action::Make(ActionKind::kForward, r, mb));
    }
    program.resize(program.size() + 3 * (pp - 1 - r), Action::Bubble());
    for (int mb = 0; mb < microbatches; ++mb) {
      program.push_back(Action::Make(ActionKind::kBackward, r, mb));
    }
  }
  return schedule;
}

}  // namespace jitpipe
