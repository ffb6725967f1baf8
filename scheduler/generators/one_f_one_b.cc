#include "scheduler/generators/one_f_one_b.h"

#include <algorithm>

#include "base/status_macros.h"
#include "scheduler/generators/compute_schedule.h"

namespace jitpipe {

absl::StatusOr<Schedule> GenerateOneFOneB(int pp, int microbatches, int stages_per_rank) {
  RETURN_IF_ERROR(RequireStagesPerRank("1f1b", 1, stages_per_rank));
  Schedule schedule = NewComputeSchedule("1f1b", Placement::kLoop, pp, 1, microbatches);
  for (int r = 0; r < pp; ++r) {
    RankProgram& program = schedule.ranks[r];
    program.reserve(2 * microbatches);
    auto forward = [&](int mb) { program.push_back(Action::Make(ActionKind::kForward, r, mb)); };
    auto backward = [&](int mb) {
      program.push_back(Action::Make(ActionKind::kBackward, r, mb));
    };
    const int warmup = std::min(microbatches, pp - r);
    for (int mb = 0; mb < warmup; ++mb) forward(mb);
    // Steady phase: backward i is followed by forward warmup + i.
    int next_backward = 0;
    for (int next_forward = warmup; next_forward < microbatches; ++next_forward) {
      backward(next_backward++);
      forward(next_forward);
    }
    while (next_backward < microbatches) backward(next_backward++);
  }
  return schedule;
}

}  // namespace jitpipe
