#include "scheduler/analysis/pass_utils.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace jitpipe {
absl::Status CheckActionIndices(const Schedule& schedule, int rank, size_t index,
                                const Action& action) {
  if (action.is_bubble()) return absl::OkStatus();
  if (!action.is_compound()) return CheckPartIndices(schedule, rank, index, action, action);
  if (action.sub_actions.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(rank, index, action), ": an OVERLAP_F_B without sub-actions"));
  }
  for (const Action& sub : action.sub_actions) {
    RETURN_IF_ERROR(CheckPartIndices(schedule, rank, index, action, sub));
  }
  return absl::OkStatus();
}

absl::Status CheckIndices(const Schedule& schedule) {
  return CheckProgram(schedule, "", [](const Action&) { return false; });
}

bool HasAnyKind(const Schedule& schedule, std::initializer_list<ActionKind> kinds) {
  auto matches = [&](const Action& a) {
    for (ActionKind k : kinds) {
      if (a.kind == k) return true;
    }
    return false;
  };
  for (const RankProgram& program : schedule.ranks) {
    for (const Action& a : program) {
      if (matches(a)) return true;
      for (const Action& sub : a.sub_actions) {
        if (matches(sub)) return true;
      }
    }
  }
  return false;
}

Schedule WithPrograms(const Schedule& in, std::vector<RankProgram> ranks, bool lowered) {
  Schedule out;
  out.name = in.name;
  out.pp = in.pp;
  out.stages_per_rank = in.stages_per_rank;
  out.microbatches = in.microbatches;
  out.chains = in.chains;
  out.placement = in.placement;
  out.stage_to_rank = in.stage_to_rank;
  out.lowered = lowered;
  out.ranks = std::move(ranks);
  return out;
}

}  // namespace jitpipe
