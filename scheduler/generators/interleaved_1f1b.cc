#include "scheduler/generators/interleaved_1f1b.h"

#include <algorithm>

#include "base/status_macros.h"
#include "scheduler/generators/compute_schedule.h"
#include "scheduler/generators/interleaved_rounds.h"

namespace jitpipe {
namespace {

constexpr char kName[] = "interleaved-1f1b";

RankProgram RankOps(const InterleavedRounds& rounds, int rank) {
  const int p = rounds.pp();
  const int ops = rounds.ops_per_rank();
  const int warmup = rounds.Warmup(rank, /*hop_factor=*/2);
  const int post_warmup_bubbles =
      std::max(0, rounds.stages_per_rank() * p + 2 * (p - 1 - rank) - (warmup + rank));
  RankProgram program;
  program.reserve(rank + post_warmup_bubbles + 2 * ops + warmup);
  program.resize(rank, Action::Bubble());
  for (int j = 0; j < warmup; ++j) program.push_back(rounds.Forward(rank, j));
  if (warmup > 0) program.resize(program.size() + post_warmup_bubbles, Action::Bubble());
  // Index space: j numbers the rank's backwards; forward warmup + j pairs with
  // backward j in the steady phase.
  for (int j = 0; j < ops - warmup; ++j) {
    program.push_back(rounds.Forward(rank, warmup + j));
    program.push_back(rounds.Backward(rank, j, ActionKind::kBackward));
  }
  for (int j = ops - warmup; j < ops; ++j) {
    program.push_back(Action::Bubble());
    program.push_back(rounds.Backward(rank, j, ActionKind::kBackward));
  }
  return program;
}

}  // namespace

absl::StatusOr<Schedule> GenerateInterleaved1F1B(int pp, int microbatches, int stages_per_rank) {
  ASSIGN_OR_RETURN(InterleavedRounds rounds,
                   InterleavedRounds::Create(kName, pp, microbatches, stages_per_rank));
  Schedule schedule =
      NewComputeSchedule(kName, Placement::kLoop, pp, stages_per_rank, microbatches);
  for (int r = 0; r < pp; ++r) schedule.ranks[r] = RankOps(rounds, r);
  return schedule;
}

}  // namespace jitpipe
