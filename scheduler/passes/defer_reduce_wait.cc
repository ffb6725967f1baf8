#include "scheduler/passes/defer_reduce_wait.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "scheduler/analysis/pass_utils.h"

namespace jitpipe {
namespace {

RankProgram DeferOnRank(const RankProgram& program) {
  RankProgram out;
  out.reserve(program.size() + 4);
  int32_t outstanding = -1;  // the stage whose reduction is not yet waited for
  for (const Action& a : program) {
    if (a.kind == ActionKind::kReduceGrad) {
      if (outstanding >= 0) {
        out.push_back(Action::StageWide(ActionKind::kWaitReduceGrad, outstanding));
      }
      outstanding = a.stage;
    }
    out.push_back(a);
  }
  if (outstanding >= 0) out.push_back(Action::StageWide(ActionKind::kWaitReduceGrad, outstanding));
  return out;
}

}  // namespace

absl::StatusOr<Schedule> DeferReduceWait(const Schedule& in) {
  if (in.stages_per_rank < 2) {
    return absl::InvalidArgumentError(
        "deferring reduction waits needs ranks with two or more stages: with one, nothing can "
        "run between a stage's reduction and its wait (PyTorch refuses defer_reduce_grad_wait "
        "for single-stage schedules)");
  }
  RETURN_IF_ERROR(CheckProgram(in, "a program without WAIT_REDUCE_GRAD", [](const Action& a) {
    return a.kind == ActionKind::kWaitReduceGrad;
  }));
  if (!HasAnyKind(in, {ActionKind::kReduceGrad})) {
    return absl::FailedPreconditionError(
        "no REDUCE_GRAD to defer the wait of (lower with reduce_grad)");
  }
  std::vector<RankProgram> ranks;
  ranks.reserve(in.pp);
  for (const RankProgram& program : in.ranks) ranks.push_back(DeferOnRank(program));
  return WithPrograms(in, std::move(ranks), /*lowered=*/true);
}

}  // namespace jitpipe
