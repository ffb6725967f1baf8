#include "scheduler/generators/zbv_zero_bubble.h"

#include <algorithm>
#include <utility>

#include "base/status_macros.h"
#include "scheduler/generators/compute_schedule.h"

namespace jitpipe {
namespace {

constexpr char kName[] = "zbv";

// Emits one rank's order, counting F, I and W per chunk (0: stage r, 1: stage
// 2p-1-r) as PyTorch does.
class RankEmitter {
 public:
  RankEmitter(int pp, int rank) : stage_{rank, 2 * pp - 1 - rank} {}

  void F(int chunk) { Emit(ActionKind::kForward, chunk, forwards_[chunk]++); }
  void I(int chunk) { Emit(ActionKind::kBackwardInput, chunk, inputs_[chunk]++); }
  void W(int chunk) { Emit(ActionKind::kBackwardWeight, chunk, weights_[chunk]++); }
  void Bubbles(int n) { program_.resize(program_.size() + n, Action::Bubble()); }

  int forwards(int chunk) const { return forwards_[chunk]; }
  int inputs(int chunk) const { return inputs_[chunk]; }
  int weights(int chunk) const { return weights_[chunk]; }

  // The order with every action on a microbatch >= `microbatches` replaced by
  // a bubble.
  RankProgram Take(int microbatches) && {
    for (Action& action : program_) {
      if (!action.is_bubble() && action.microbatch >= microbatches) action = Action::Bubble();
    }
    return std::move(program_);
  }

 private:
  void Emit(ActionKind kind, int chunk, int microbatch) {
    program_.push_back(Action::Make(kind, stage_[chunk], microbatch));
  }

  int stage_[2];
  int forwards_[2] = {0, 0};
  int inputs_[2] = {0, 0};
  int weights_[2] = {0, 0};
  RankProgram program_;
};

// Warmup: 2(p-r)-1 x F0;  r x [F1 F0];  p-r x [F1 I1 W1].
void EmitWarmup(RankEmitter& e, int pp, int rank) {
  for (int i = 0; i < 2 * (pp - rank) - 1; ++i) e.F(0);
  for (int i = 0; i < rank; ++i) {
    e.F(1);
    e.F(0);
  }
  for (int i = 0; i < pp - rank; ++i) {
    e.F(1);
    e.I(1);
    e.W(1);
  }
}

// Steady: [F0 while F0 < n] I0 W0 F1 I1 W1 until chunk 1 has caught up.
void EmitSteady(RankEmitter& e, int n) {
  while (e.forwards(1) < e.forwards(0) || e.forwards(0) < n) {
    if (e.forwards(0) < n) e.F(0);
    e.I(0);
    e.W(0);
    e.F(1);
    e.I(1);
    e.W(1);
  }
}

// Cooldown: r x [I0 I1];  p-r x [I0 W0];  then the Ws still due, chunk 1's
// first. Each W takes its chunk's next W number; up to here every I had its
// W, which is where PyTorch restarts its W counters.
void EmitCooldown(RankEmitter& e, int pp, int rank) {
  for (int i = 0; i < rank; ++i) {
    e.I(0);
    e.I(1);
  }
  for (int i = 0; i < pp - rank; ++i) {
    e.I(0);
    e.W(0);
  }
  while (e.weights(1) < e.inputs(1)) e.W(1);
  while (e.weights(0) < e.inputs(0)) e.W(0);
}

RankProgram RankOps(int pp, int microbatches, int rank) {
  RankEmitter e(pp, rank);
  e.Bubbles(rank);
  EmitWarmup(e, pp, rank);
  EmitSteady(e, std::max(2 * pp - 1, microbatches));
  EmitCooldown(e, pp, rank);
  return std::move(e).Take(microbatches);
}

}  // namespace

absl::StatusOr<Schedule> GenerateZbvZeroBubble(int pp, int microbatches, int stages_per_rank) {
  RETURN_IF_ERROR(RequireStagesPerRank(kName, 2, stages_per_rank));
  Schedule schedule = NewComputeSchedule(kName, Placement::kV, pp, 2, microbatches);
  for (int r = 0; r < pp; ++r) schedule.ranks[r] = RankOps(pp, microbatches, r);
  return schedule;
}

}  // namespace jitpipe
