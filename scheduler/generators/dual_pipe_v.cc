#include "scheduler/generators/dual_pipe_v.h"

#include <cstddef>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/generators/compute_schedule.h"

namespace jitpipe {
namespace {

constexpr char kName[] = "dualpipev";

// Emits one rank's order. Chunk 0 is stage s0 = r, chunk 1 is s1 = 2p-1-r.
class RankEmitter {
 public:
  RankEmitter(int pp, int rank) : stage_{rank, 2 * pp - 1 - rank} {}

  void F(int chunk) { program_.push_back(Forward(chunk)); }
  void B(int chunk) { program_.push_back(FullBackward(chunk)); }
  void I(int chunk) {
    const int mb = backwards_[chunk]++;
    program_.push_back(Action::Make(ActionKind::kBackwardInput, stage_[chunk], mb));
    pending_weights_.emplace_back(chunk, mb);
  }
  // B before zero-bubble mode, I after.
  void X(int chunk, bool zero_bubble) {
    if (zero_bubble) {
      I(chunk);
    } else {
      B(chunk);
    }
  }
  // The oldest I's W, if any I still lacks one.
  void PendingW() {
    if (next_weight_ == pending_weights_.size()) return;
    const auto [chunk, mb] = pending_weights_[next_weight_++];
    program_.push_back(Action::Make(ActionKind::kBackwardWeight, stage_[chunk], mb));
  }
  void Overlap(int forward_chunk, int backward_chunk) {
    program_.push_back(Action::Overlap({Forward(forward_chunk), FullBackward(backward_chunk)}));
  }

  RankProgram Take() && { return std::move(program_); }

 private:
  Action Forward(int chunk) {
    return Action::Make(ActionKind::kForward, stage_[chunk], forwards_[chunk]++);
  }
  Action FullBackward(int chunk) {
    return Action::Make(ActionKind::kBackward, stage_[chunk], backwards_[chunk]++);
  }

  int stage_[2];
  int forwards_[2] = {0, 0};
  int backwards_[2] = {0, 0};  // full backwards and Is alike
  std::vector<std::pair<int, int>> pending_weights_;  // (chunk, mb) of each I
  size_t next_weight_ = 0;
  RankProgram program_;
};

// Steps 1-5 of the header's table: warmup and the overlapped steady phase.
void EmitWarmupAndSteady(RankEmitter& e, int pp, int microbatches, int rank) {
  for (int i = 0; i < 2 * (pp - rank - 1); ++i) e.F(0);
  for (int i = 0; i < rank + 1; ++i) {
    e.F(0);
    e.F(1);
  }
  for (int i = 0; i < pp - rank - 1; ++i) {
    e.I(1);
    e.PendingW();
    e.F(1);
  }
  for (int i = 0; i < microbatches - 2 * pp + rank + 1; ++i) {
    if (i == 0 && rank == pp - 1) {
      // Not overlapped, to shorten the bubble at the V's turn.
      e.F(0);
      e.B(1);
    } else {
      e.Overlap(0, 1);
    }
    e.Overlap(1, 0);
  }
  for (int i = 0; i < pp - rank - 1; ++i) {
    e.B(1);
    e.Overlap(1, 0);
  }
}

// Steps 6-8: the cooldown, switching to split backwards half way.
void EmitCooldown(RankEmitter& e, int pp, int rank) {
  const int pairs = rank + 1;
  bool zero_bubble = false;
  for (int i = 0; i < pairs; ++i) {
    const bool switch_now = i == pairs / 2;
    if (switch_now && rank % 2 == 1) zero_bubble = true;
    e.X(1, zero_bubble);
    if (switch_now && rank % 2 == 0) zero_bubble = true;
    e.X(0, zero_bubble);
  }
  for (int i = 0; i < pp - rank - 1; ++i) {
    e.PendingW();
    e.X(0, zero_bubble);
  }
  for (int i = 0; i < rank + 1; ++i) e.PendingW();
}

}  // namespace

absl::StatusOr<Schedule> GenerateDualPipeV(int pp, int microbatches, int stages_per_rank) {
  RETURN_IF_ERROR(RequireStagesPerRank(kName, 2, stages_per_rank));
  if (microbatches < 2 * pp) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": needs at least 2 x pp = ", 2 * pp, " microbatches (2 stages per rank x ",
        CountOf(pp, "rank", "ranks"), "), got ", microbatches));
  }
  Schedule schedule = NewComputeSchedule(kName, Placement::kV, pp, 2, microbatches);
  for (int r = 0; r < pp; ++r) {
    RankEmitter e(pp, r);
    EmitWarmupAndSteady(e, pp, microbatches, r);
    EmitCooldown(e, pp, r);
    schedule.ranks[r] = std::move(e).Take();
  }
  return schedule;
}

}  // namespace jitpipe
