#include "scheduler/passes/split_backward.h"

#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "scheduler/analysis/pass_utils.h"

namespace jitpipe {
namespace {

Action Weight(const Action& b) {
  return Action::Make(ActionKind::kBackwardWeight, b.stage, b.microbatch);
}

RankProgram SplitRank(const RankProgram& program) {
  RankProgram out;
  out.reserve(program.size() * 2);
  for (const Action& a : program) {
    if (a.kind == ActionKind::kBackward) {
      out.push_back(Action::Make(ActionKind::kBackwardInput, a.stage, a.microbatch));
      out.push_back(Weight(a));
      continue;
    }
    if (!a.is_compound()) {
      out.push_back(a);
      continue;
    }
    Action compound = a;
    std::vector<Action> weights;
    for (Action& sub : compound.sub_actions) {
      if (sub.kind != ActionKind::kBackward) continue;
      weights.push_back(Weight(sub));
      sub.kind = ActionKind::kBackwardInput;
    }
    out.push_back(std::move(compound));
    for (Action& w : weights) out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

absl::StatusOr<Schedule> SplitBackward(const Schedule& in) {
  RETURN_IF_ERROR(CheckProgram(
      in, "a compute-only program (F, B, I, W, OVERLAP_F_B and bubbles)", [](const Action& a) {
        return !a.is_bubble() && !IsCompute(a.kind);
      }));
  std::vector<RankProgram> ranks;
  ranks.reserve(in.pp);
  for (const RankProgram& program : in.ranks) ranks.push_back(SplitRank(program));
  return WithPrograms(in, std::move(ranks), in.lowered);
}

}  // namespace jitpipe
