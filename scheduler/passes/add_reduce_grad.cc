#include "scheduler/passes/add_reduce_grad.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "scheduler/analysis/pass_utils.h"

namespace jitpipe {
namespace {

bool CompletesGradient(ActionKind kind) {
  return kind == ActionKind::kBackward || kind == ActionKind::kBackwardWeight;
}

// One rank's program with REDUCE_GRAD added. `counts` holds, per stage, the B
// and W seen so far (a stage lives on one rank, so one table serves all).
RankProgram AddToRank(const RankProgram& program, int microbatches,
                      std::vector<int32_t>& counts) {
  RankProgram out;
  out.reserve(program.size() + 4);
  for (const Action& a : program) {
    if (a.is_bubble()) continue;
    out.push_back(a);
    // The stages this action completes, in sub-action order, are reduced right after it.
    auto count = [&](const Action& leaf) {
      if (CompletesGradient(leaf.kind) && ++counts[leaf.stage] == microbatches) {
        out.push_back(Action::StageWide(ActionKind::kReduceGrad, leaf.stage));
      }
    };
    if (a.is_compound()) {
      for (const Action& sub : a.sub_actions) count(sub);
    } else {
      count(a);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<Schedule> AddReduceGrad(const Schedule& in) {
  RETURN_IF_ERROR(CheckProgram(
      in, "a program without REDUCE_GRAD, sends and receives", [](const Action& a) {
        return a.kind == ActionKind::kReduceGrad || IsSendRecv(a.kind);
      }));
  std::vector<int32_t> counts(in.num_stages(), 0);
  std::vector<RankProgram> ranks;
  ranks.reserve(in.pp);
  for (const RankProgram& program : in.ranks) {
    ranks.push_back(AddToRank(program, in.microbatches_per_chain(), counts));
  }
  return WithPrograms(in, std::move(ranks), /*lowered=*/true);
}

}  // namespace jitpipe
