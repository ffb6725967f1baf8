#include "scheduler/generators/looped_bfs.h"

#include "scheduler/generators/compute_schedule.h"

namespace jitpipe {

absl::StatusOr<Schedule> GenerateLoopedBfs(int pp, int microbatches, int stages_per_rank) {
  Schedule schedule =
      NewComputeSchedule("looped-bfs", Placement::kLoop, pp, stages_per_rank, microbatches);
  const int v = stages_per_rank;
  for (int r = 0; r < pp; ++r) {
    RankProgram& program = schedule.ranks[r];
    program.reserve(2 * microbatches * v + r + 2 * (pp - 1 - r));
    program.resize(r, Action::Bubble());
    // Index spaces: local stage index c (stage c*p + r) x microbatch mb.
    for (int c = 0; c < v; ++c) {
      for (int mb = 0; mb < microbatches; ++mb) {
        program.push_back(Action::Make(ActionKind::kForward, c * pp + r, mb));
      }
    }
    program.resize(program.size() + 2 * (pp - 1 - r), Action::Bubble());
    for (int c = v - 1; c >= 0; --c) {
      for (int mb = microbatches - 1; mb >= 0; --mb) {
        program.push_back(Action::Make(ActionKind::kBackward, c * pp + r, mb));
      }
    }
  }
  return schedule;
}

}  // namespace jitpipe
