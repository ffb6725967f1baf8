#include "scheduler/generators/interleaved_zero_bubble.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "scheduler/generators/add_bubbles_to_actions.h"
#include "scheduler/generators/compute_schedule.h"
#include "scheduler/generators/interleaved_rounds.h"

namespace jitpipe {
namespace {

constexpr char kName[] = "interleaved-zb";

// The rank's order before the lock-step bubble pass.
RankProgram RankOps(const InterleavedRounds& rounds, int rank) {
  const int p = rounds.pp();
  const int ops = rounds.ops_per_rank();
  const int warmup = rounds.Warmup(rank, /*hop_factor=*/1);
  RankProgram program;
  program.reserve(rank + (p - 1 - rank) + 3 * ops);
  program.resize(rank, Action::Bubble());
  for (int j = 0; j < warmup; ++j) program.push_back(rounds.Forward(rank, j));
  if (warmup > 0) program.resize(program.size() + (p - 1 - rank), Action::Bubble());
  // Index space: j numbers the rank's backwards. Forward warmup + j precedes
  // I(j) while forwards remain; W lags its I by `rank` backwards.
  for (int j = 0; j < ops; ++j) {
    if (warmup + j < ops) program.push_back(rounds.Forward(rank, warmup + j));
    program.push_back(rounds.Backward(rank, j, ActionKind::kBackwardInput));
    if (j >= rank) program.push_back(rounds.Backward(rank, j - rank, ActionKind::kBackwardWeight));
  }
  for (int j = std::max(0, ops - rank); j < ops; ++j) {
    program.push_back(rounds.Backward(rank, j, ActionKind::kBackwardWeight));
  }
  return program;
}

}  // namespace

absl::StatusOr<Schedule> GenerateInterleavedZeroBubble(int pp, int microbatches,
                                                       int stages_per_rank) {
  ASSIGN_OR_RETURN(InterleavedRounds rounds,
                   InterleavedRounds::Create(kName, pp, microbatches, stages_per_rank));
  std::vector<RankProgram> before(pp);
  for (int r = 0; r < pp; ++r) before[r] = RankOps(rounds, r);
  Schedule schedule =
      NewComputeSchedule(kName, Placement::kLoop, pp, stages_per_rank, microbatches);
  ASSIGN_OR_RETURN(schedule.ranks,
                   AddBubblesToActions(std::move(before), pp * stages_per_rank, microbatches));
  return schedule;
}

}  // namespace jitpipe
