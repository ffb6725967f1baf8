#include "scheduler/generators/dual_pipe.h"

#include <algorithm>
#include <array>
#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"

namespace jitpipe {
namespace {

// Records one rank's program as upstream's step() would run it. Upstream
// speaks of "phases": on the first half of the ranks phase 0 is the forward
// direction (chain 0), on the second half it is the reverse direction
// (chain 1), so that phase 0 is always the direction whose first stage is
// nearer to this rank.
class DualPipeRank {
 public:
  DualPipeRank(int pp, int rank, int microbatches_per_chain)
      : pp_(pp), rank_(rank), half_(pp / 2), half_rank_(std::min(rank, pp - 1 - rank)),
        chunks_(microbatches_per_chain), second_half_(rank >= pp / 2),
        middle_(rank == pp / 2 - 1 || rank == pp / 2) {}

  RankProgram Run() &&;

 private:
  int Chain(int phase) const { return phase ^ (second_half_ ? 1 : 0); }
  int Stage(int chain) const { return chain == 0 ? rank_ : 2 * pp_ - 1 - rank_; }
  Action NextForward(int phase) {
    const int chain = Chain(phase);
    return Action::Make(ActionKind::kForward, Stage(chain), forwards_[chain]++);
  }
  // A full backward, or with `defer_weight` its I, queueing the W.
  Action NextBackward(int phase, bool defer_weight) {
    const int chain = Chain(phase);
    const int mb = backwards_[chain]++;
    if (!defer_weight) return Action::Make(ActionKind::kBackward, Stage(chain), mb);
    weights_.push_back(Action::Make(ActionKind::kBackwardWeight, Stage(chain), mb));
    return Action::Make(ActionKind::kBackwardInput, Stage(chain), mb);
  }
  void Forward(int phase) { program_.push_back(NextForward(phase)); }
  void Backward(int phase, bool defer_weight = false) {
    program_.push_back(NextBackward(phase, defer_weight));
  }
  void ForwardBackward(int forward_phase, int backward_phase) {
    Action f = NextForward(forward_phase);
    Action b = NextBackward(backward_phase, false);
    program_.push_back(Action::Overlap({std::move(f), std::move(b)}));
  }
  void Weight() {
    program_.push_back(std::move(weights_.front()));
    weights_.pop_front();
  }

  const int pp_, rank_, half_, half_rank_, chunks_;
  const bool second_half_, middle_;
  std::array<int, 2> forwards_ = {0, 0};   // by chain: next microbatch
  std::array<int, 2> backwards_ = {0, 0};  // by chain
  std::deque<Action> weights_;             // deferred W, oldest first
  RankProgram program_;
};

// Step lengths depend on the rank's distance from the nearer end of the
// pipeline (half_rank_); each step runs its loop body that many times.
RankProgram DualPipeRank::Run() && {
  // 1. nF0: warm up the nearer direction.
  for (int i = 0; i < (half_ - half_rank_ - 1) * 2; ++i) Forward(0);
  // 2. nF0F1: alternate forwards of both directions.
  for (int i = 0; i <= half_rank_; ++i) {
    Forward(0);
    Forward(1);
  }
  // 3. nB1W1F1: zero-bubble backwards of the farther direction.
  for (int i = 0; i < half_ - half_rank_ - 1; ++i) {
    Backward(1, /*defer_weight=*/true);
    Weight();
    Forward(1);
  }
  // 4. nF0B1F1B0: the main overlapped phase. The two middle ranks do not
  // overlap their first pair (upstream: it shortens the bubble).
  for (int i = 0; i < chunks_ - pp_ + half_rank_ + 1; ++i) {
    if (i == 0 && middle_) {
      Forward(0);
      Backward(1);
    } else {
      ForwardBackward(0, 1);
    }
    ForwardBackward(1, 0);
  }
  // 5. nB1F1B0.
  for (int i = 0; i < half_ - half_rank_ - 1; ++i) {
    Backward(1);
    ForwardBackward(1, 0);
  }
  // 6. nB1B0: from half-way on, weight gradients are deferred.
  bool defer = false;
  const int step6 = half_rank_ + 1;
  for (int i = 0; i < step6; ++i) {
    if (i == step6 / 2 && half_rank_ % 2 == 1) defer = true;
    Backward(1, defer);
    if (i == step6 / 2 && half_rank_ % 2 == 0) defer = true;
    Backward(0, defer);
  }
  // 7. nWB0.
  for (int i = 0; i < half_ - half_rank_ - 1; ++i) {
    Weight();
    Backward(0, /*defer_weight=*/true);
  }
  // 8. nW: drain the deferred weight gradients.
  while (!weights_.empty()) Weight();
  return std::move(program_);
}

}  // namespace

absl::StatusOr<Schedule> GenerateDualPipe(int pp, int microbatches, int stages_per_rank) {
  if (stages_per_rank != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dualpipe: stages per rank must be 2 (one stage of each direction), got ",
        stages_per_rank));
  }
  if (pp % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dualpipe: pp must be even (rank r pairs with rank pp-1-r), got ", pp, "; use ",
        pp == 1 ? "2" : absl::StrCat(pp - 1, " or ", pp + 1)));
  }
  if (microbatches % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dualpipe: microbatches must be even (half run in each direction), got ", microbatches,
        "; use ", microbatches - 1, " or ", microbatches + 1));
  }
  if (microbatches < 2 * pp) {
    return absl::InvalidArgumentError(
        absl::StrCat("dualpipe: microbatches must be at least 2 * pp = ", 2 * pp, ", got ",
                     microbatches, "; use ", 2 * pp, " or more"));
  }
  Schedule s;
  s.name = "dualpipe";
  s.pp = pp;
  s.stages_per_rank = 2;
  s.microbatches = microbatches;
  s.chains = 2;
  s.placement = Placement::kV;
  s.stage_to_rank = StageToRank(Placement::kV, pp, 2);
  for (int r = 0; r < pp; ++r) {
    s.ranks.push_back(DualPipeRank(pp, r, microbatches / 2).Run());
  }
  return s;
}

}  // namespace jitpipe
