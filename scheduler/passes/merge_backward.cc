#include "scheduler/passes/merge_backward.h"

#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "scheduler/analysis/pass_utils.h"

namespace jitpipe {
namespace {

bool IsWeightOf(const Action& w, const Action& i) {
  return w.kind == ActionKind::kBackwardWeight && w.stage == i.stage &&
         w.microbatch == i.microbatch;
}

RankProgram MergeRank(const RankProgram& program) {
  RankProgram out;
  out.reserve(program.size());
  for (size_t i = 0; i < program.size(); ++i) {
    const Action& a = program[i];
    if (a.is_bubble()) continue;
    size_t next = i + 1;
    while (next < program.size() && program[next].is_bubble()) ++next;
    if (a.kind == ActionKind::kBackwardInput && next < program.size() &&
        IsWeightOf(program[next], a)) {
      out.push_back(Action::Make(ActionKind::kBackward, a.stage, a.microbatch));
      i = next;  // the W is consumed
      continue;
    }
    out.push_back(a);
  }
  return out;
}

}  // namespace

absl::StatusOr<Schedule> MergeBackward(const Schedule& in) {
  RETURN_IF_ERROR(CheckProgram(
      in, "a compute-only program (F, B, I, W, OVERLAP_F_B and bubbles)", [](const Action& a) {
        return !a.is_bubble() && !IsCompute(a.kind);
      }));
  std::vector<RankProgram> ranks;
  ranks.reserve(in.pp);
  for (const RankProgram& program : in.ranks) ranks.push_back(MergeRank(program));
  return WithPrograms(in, std::move(ranks), in.lowered);
}

}  // namespace jitpipe
